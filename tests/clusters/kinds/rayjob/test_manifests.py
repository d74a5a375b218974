"""A job's object (clusters.kinds.rayjob.manifests): a RayJob with the Ray cluster an
interactive cluster of its shape would get, and a submitter pod of its own."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from clusters.kinds.raycluster.manifests import raycluster
from clusters.kinds.rayjob.manifests import manifests, rayjob

pytestmark = pytest.mark.django_db


def _details(**fields: Any) -> Any:
    values = {
        "entrypoint": "python train.py",
        "runtime_env": {},
        "active_deadline_seconds": 600,
        "ttl_seconds_after_finished": 60,
        "host": None,
    }
    values.update(fields)
    return SimpleNamespace(**values)


def test_a_rayjob_embeds_the_clusters_raycluster_spec(make_cluster: Any) -> None:
    row = make_cluster(name="bob-train", workload="job")
    obj = rayjob(row, _details(), suspend=True)
    assert obj["kind"] == "RayJob" and obj["spec"]["suspend"] is True
    assert obj["spec"]["rayClusterSpec"] == raycluster(row)["spec"]
    assert obj["spec"]["activeDeadlineSeconds"] == 600
    assert obj["spec"]["submitterPodTemplate"]["spec"]["restartPolicy"] == "Never"


def test_a_candidates_unsaved_details_are_used(make_cluster: Any) -> None:
    row = make_cluster(name="bob-train", workload="job")
    row._job_details = _details(entrypoint="python eval.py")
    (obj,) = manifests(row)
    assert obj["spec"]["entrypoint"] == "python eval.py"
