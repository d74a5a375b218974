"""The job part of a job request (clusters.kinds.rayjob.spec)."""

from __future__ import annotations

from clusters.kinds.rayjob.spec import MAX_JOB_NAME, JobSpec


def test_from_data_names_the_host_cluster_and_defaults_the_rest() -> None:
    spec = JobSpec.from_data({"entrypoint": "python a.py", "cluster": "bob-dev"})
    assert spec.host == "bob-dev" and spec.name is None
    assert spec.runtime_env == {} and spec.ttl_seconds_after_finished == 0
    assert spec.active_deadline_seconds is None and not spec.container_gpus


def test_a_job_name_leaves_room_for_kuberays_suffix() -> None:
    assert MAX_JOB_NAME + len("-abcde") <= 53
