"""A job as the API returns it (clusters.kinds.rayjob.output): the request's fields
without a cluster's TTL or dashboard, its run (``job``, with its host by name), its
GPU-hours, and the driver's output."""

from __future__ import annotations

from typing import Any

import pytest

from clusters.kinds.rayjob.output import JobLogsOut, JobOut
from clusters.models import Job, Workload
from clusters.output.request import ClusterOut
from clusters.selectors import with_recent_events

pytestmark = pytest.mark.django_db


def test_a_job_reads_as_a_request_with_its_run(make_cluster: Any) -> None:
    host = make_cluster(name="bob-host", state="ready")
    host.save()
    row = make_cluster(name="bob-eval", workload=Workload.JOB, state="running")
    row.save()
    Job.objects.create(
        request=row,
        entrypoint="python eval.py",
        runtime_env={"pip": ["torch"]},
        host=host,
        job_status="RUNNING",
        ray_job_id="raysubmit_1",
    )
    data = JobOut(with_recent_events(type(row).objects.unscoped().get(pk=row.pk))).data
    assert data["name"] == "bob-eval" and data["state"] == "running"
    assert data["endpoints"] is None  # reached through its logs, not a dashboard
    assert "ttl_hours" not in data and "suspended_at" not in data
    assert {"gpus_released_at", "job", "gpu_hours"} <= set(data)
    assert set(data) - {"gpus_released_at", "job", "gpu_hours"} <= set(ClusterOut.Meta.fields)
    run = data["job"]
    assert (run["entrypoint"], run["runtime_env"]) == ("python eval.py", {"pip": ["torch"]})
    assert (run["cluster"], run["job_status"], run["ray_job_id"]) == (
        "bob-host",
        "RUNNING",
        "raysubmit_1",
    )
    assert data["gpu_hours"] == 0.0  # it never held GPUs of its own


def test_the_driver_s_output_says_where_it_was_read() -> None:
    found = {"origin": "saved", "pod": "", "text": "done\n", "truncated": False, "message": ""}
    assert JobLogsOut(found).data == found
