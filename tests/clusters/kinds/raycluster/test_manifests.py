"""An interactive cluster's object (clusters.kinds.raycluster.manifests); the shapes are
pinned by tests/clusters/kube/test_manifests.py and the golden files."""

from __future__ import annotations

from typing import Any

import pytest

from clusters.kinds.raycluster.manifests import manifests, user_env
from clusters.kube.manifests import cluster_manifests

pytestmark = pytest.mark.django_db


def test_one_raycluster_named_as_the_row(make_cluster: Any) -> None:
    row = make_cluster(name="bob-dev-x")
    (obj,) = manifests(row)
    assert (obj["kind"], obj["metadata"]["name"]) == ("RayCluster", "bob-dev-x")
    assert obj["metadata"]["namespace"] == row.tenant.namespace
    assert cluster_manifests(row) == [obj]  # the shared entry point asks the kind


def test_user_env_is_sorted_by_name(make_cluster: Any) -> None:
    row = make_cluster(env={"B": "2", "A": "1"})
    assert user_env(row) == [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]


RACK = "network.topology.kubernetes.io/rack"


def test_a_gang_asking_for_one_rack_keeps_its_workers_together(
    make_cluster: Any, alice: Any
) -> None:
    # Jobs' and services' Ray clusters are built by the same raycluster().
    row = make_cluster(owner=alice, name="train", kind="prod", workers=2)
    row.pk = 42
    row.topology_level, row.topology_mode = RACK, "required"
    (obj,) = [m for m in cluster_manifests(row) if m["kind"].startswith("Ray")]
    spec = obj["spec"]
    ray = spec.get("rayClusterSpec") or spec.get("rayClusterConfig") or spec
    (group,) = ray["workerGroupSpecs"]
    term = {
        "labelSelector": {
            "matchLabels": {"gangway.dev/cluster-id": "42", "ray.io/node-type": "worker"}
        },
        "topologyKey": RACK,
    }
    affinity = group["template"]["spec"]["affinity"]
    assert affinity["podAffinity"] == {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
    assert "affinity" not in ray["headGroupSpec"]["template"]["spec"]

    row.topology_mode = "preferred"
    (obj,) = [m for m in cluster_manifests(row) if m["kind"].startswith("Ray")]
    ray = obj["spec"].get("rayClusterSpec") or obj["spec"].get("rayClusterConfig") or obj["spec"]
    preferred = ray["workerGroupSpecs"][0]["template"]["spec"]["affinity"]["podAffinity"]
    assert preferred == {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 100, "podAffinityTerm": term}
        ]
    }


def test_a_gang_asking_nothing_of_topology_has_no_pod_affinity(make_cluster: Any) -> None:
    (obj,) = manifests(make_cluster(kind="prod", workers=2))
    (group,) = obj["spec"]["workerGroupSpecs"]
    assert "podAffinity" not in group["template"]["spec"].get("affinity", {})
