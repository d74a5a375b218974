"""What a job answers the shared engine (clusters.kinds.rayjob.engine); converge and
fold run against kubesim in tests/clusters/engine/test_jobs.py."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from clusters.domain.states import State
from clusters.kinds.rayjob import engine

pytestmark = pytest.mark.django_db


def test_every_state_but_deleted_asks_something_of_kubernetes(make_cluster: Any) -> None:
    assert engine.wants_provisioning(make_cluster(workload="job", state=State.SUCCEEDED))
    assert not engine.wants_provisioning(make_cluster(workload="job", state=State.DELETED))


def test_a_candidates_deadline_comes_from_its_unsaved_details(make_cluster: Any) -> None:
    row = make_cluster(workload="job")
    row._job_details = SimpleNamespace(active_deadline_seconds=900)
    assert engine.deadline_seconds(row) == 900


def test_bundles_and_orphans() -> None:
    assert engine.needs_bundle(State.RUNNING) and not engine.needs_bundle(State.SUCCEEDED)
    assert engine.orphan({"metadata": {}})


def test_only_unfinished_pods_hold_resources() -> None:
    pods = [{"status": {"phase": "Succeeded"}}, {"status": {"phase": "Running"}}, {}]
    assert engine.holding_pods(pods) == pods[1:]
