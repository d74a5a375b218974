"""Reading Kueue's Workloads (clusters.queue.kueue): when a Workload counts as admitted,
what an eviction says, and which flavor Kueue chose. Kueue mode end to end, against
kubesim's Kueue, is ``tests/clusters/engine/test_kueue_mode.py``."""

from __future__ import annotations

from typing import Any

from clusters.kube.queues import GPU
from clusters.queue import kueue
from clusters.queue.kueue import admitted_flavor, eviction, is_admitted


def _workload(*conditions: tuple[str, str, str], admission: Any = None) -> dict[str, Any]:
    status: dict[str, Any] = {
        "conditions": [
            {"type": kind, "status": value, "reason": reason, "message": f"{reason} message"}
            for kind, value, reason in conditions
        ]
    }
    if admission is not None:
        status["admission"] = admission
    return {"status": status}


def test_admitted_needs_the_condition_and_no_eviction() -> None:
    assert is_admitted(_workload(("Admitted", "True", "Admitted")))
    assert not is_admitted(_workload(("Admitted", "False", "Pending")))
    # An evicted Workload keeps Admitted until its job stopped: not admitted any more.
    assert not is_admitted(
        _workload(("Admitted", "True", "Admitted"), ("Evicted", "True", "Preempted"))
    )


def test_an_eviction_says_kueue_s_reason_or_the_lost_reservation() -> None:
    admission = {"podSetAssignments": []}
    assert eviction(_workload(("Evicted", "True", "Preempted"), admission=admission)) == (
        "Preempted",
        "Preempted message",
    )
    assert eviction(_workload(("Admitted", "True", "Admitted"), admission=admission)) is None
    assert eviction(_workload(("QuotaReserved", "False", "Pending"))) == (
        "Pending",
        "Pending message",
    )
    assert eviction({"status": {}}) == ("Pending", "its Workload no longer holds quota")


def test_the_admitted_flavor_is_the_gpu_assignment_s() -> None:
    admission = {
        "podSetAssignments": [
            {"name": "head", "flavors": {"cpu": "ray-head"}},
            {"name": "workers", "flavors": {"cpu": "h100", GPU: "h100"}},
        ]
    }
    assert admitted_flavor({"status": {"admission": admission}}) == "h100"
    assert admitted_flavor({"status": {}}) is None


def test_a_topology_that_has_no_room_is_a_capacity_reason() -> None:
    said = (
        'couldn\'t assign flavors to pod set gpu: topology "h100" allows to fit only 2 out '
        'of 3 pod(s). Total nodes: 6; excluded: resource "nvidia.com/gpu": 1'
    )
    assert kueue._reason(said) == "capacity"
    assert kueue._reason("couldn't assign flavors: insufficient unused quota") == "tenant_quota"
