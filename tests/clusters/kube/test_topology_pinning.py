"""A gang pinned to a topology domain at admission (docs/topology.md): ``required`` gets a
required node affinity on the domain, added to every term the pod already has (terms are
alternatives), instead of the pod affinity; ``preferred`` keeps its pod affinity and
gains a preferred node affinity to the domain. Pure: fields in, pod affinity out."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from clusters.kube.topology import keep_together

RACK = "network.topology.kubernetes.io/rack"
HOSTNAME = "kubernetes.io/hostname"
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


def _packed(domain: str, levels: tuple[str, ...], *, pin: bool = True) -> Any:
    row = SimpleNamespace(pk=7, topology_level="", topology_mode="", topology_domain=domain)
    groups: list[dict[str, Any]] = [{"template": {"spec": {"affinity": PRODUCTS}}}]
    keep_together(row, groups, pin=pin, levels=levels)
    return groups[0]["template"]["spec"].get("affinity")


def test_a_gang_packed_without_a_level_only_prefers_its_rack_of_the_finest_level() -> None:
    # Packed at the finest level above hosts: the rack, not the host below it.
    affinity = _packed("rack-3", ("network.topology.kubernetes.io/block", RACK, HOSTNAME))
    assert "podAffinity" not in affinity
    node = affinity["nodeAffinity"]
    # Its own required terms (the GPU products) stay as they were; the rack is preferred.
    assert (
        node["requiredDuringSchedulingIgnoredDuringExecution"]
        == (PRODUCTS["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"])
    )
    assert node["preferredDuringSchedulingIgnoredDuringExecution"] == [
        {"weight": 100, "preference": {"matchExpressions": [IN_RACK]}}
    ]


def test_a_packed_gang_gets_nothing_in_kueue_mode_or_without_levels_or_domain() -> None:
    assert _packed("rack-3", (RACK,), pin=False) == PRODUCTS
    assert _packed("rack-3", (HOSTNAME,)) == PRODUCTS
    assert _packed("", (RACK,)) == PRODUCTS
