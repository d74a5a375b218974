"""A gang pinned to a topology domain at admission (docs/topology.md): ``required`` gets a
required node affinity on the domain, added to every term the pod already has (terms are
alternatives), instead of the pod affinity; ``preferred`` keeps its pod affinity and
gains a preferred node affinity to the domain. Pure: fields in, pod affinity out."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from clusters.kube.topology import keep_together

RACK = "network.topology.kubernetes.io/rack"
IN_RACK = {"key": RACK, "operator": "In", "values": ["rack-3"]}
PRODUCTS = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": "p", "operator": "In", "values": ["a"]}]},
                {"matchExpressions": [{"key": "p", "operator": "In", "values": ["b"]}]},
            ]
        }
    }
}


def _affinity(mode: str, domain: str, affinity: dict[str, Any] | None = None) -> Any:
    row = SimpleNamespace(pk=7, topology_level=RACK, topology_mode=mode, topology_domain=domain)
    groups = [{"template": {"spec": {"affinity": affinity} if affinity else {}}}]
    keep_together(row, groups)
    return groups[0]["template"]["spec"]["affinity"]


def test_a_required_gang_pinned_to_a_rack_gets_a_required_node_affinity_on_it() -> None:
    affinity = _affinity("required", "rack-3")
    assert "podAffinity" not in affinity
    assert affinity["nodeAffinity"] == {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [IN_RACK]}]
        }
    }
    # With the pod's GPU products as alternatives, each names the rack.
    terms = _affinity("required", "rack-3", PRODUCTS)["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    assert [t["matchExpressions"][-1] for t in terms] == [IN_RACK, IN_RACK]
    assert [t["matchExpressions"][0]["values"] for t in terms] == [["a"], ["b"]]


def test_a_preferred_gang_keeps_its_pod_affinity_and_prefers_its_rack() -> None:
    affinity = _affinity("preferred", "rack-3")
    assert "preferredDuringSchedulingIgnoredDuringExecution" in affinity["podAffinity"]
    assert affinity["nodeAffinity"] == {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 100, "preference": {"matchExpressions": [IN_RACK]}}
        ]
    }


def test_an_unpinned_gang_has_its_pod_affinity_only() -> None:
    affinity = _affinity("required", "")
    assert "requiredDuringSchedulingIgnoredDuringExecution" in affinity["podAffinity"]
    assert "nodeAffinity" not in affinity


def test_a_gang_kueue_placed_keeps_the_template_kueue_admitted() -> None:
    # In Kueue mode topology_domain mirrors Kueue's assignment: the RayCluster rendered
    # again must not gain a node affinity its admitted pod sets did not have.
    row = SimpleNamespace(
        pk=7, topology_level=RACK, topology_mode="required", topology_domain="rack-3"
    )
    groups: list[dict[str, Any]] = [{"template": {"spec": {}}}]
    keep_together(row, groups, pin=False)
    affinity = groups[0]["template"]["spec"]["affinity"]
    assert "nodeAffinity" not in affinity
    assert "requiredDuringSchedulingIgnoredDuringExecution" in affinity["podAffinity"]
