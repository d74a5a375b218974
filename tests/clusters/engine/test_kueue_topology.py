"""Topology in Kueue mode end to end: gangway writes a Topology per flavor with levels and
asks Kueue (emulated by kubesim) for the gang's level; Kueue's Topology Aware Scheduling
places every worker in one rack, and the row keeps the rack Kueue chose."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from clusters.kube.gateway import get_gateway
from clusters.models import ClusterRequest, KubeCluster
from clusters.requests import services
from clusters.rows.spec import ClusterSpec
from kubesim import KubeSim
from tenants.models import Quota, Tenant
from tests.clusters.engine.conftest import device_plugin_fleet, running_kubesim, wait_for

RACK = "network.topology.kubernetes.io/rack"
KUEUE = "kueue.x-k8s.io/v1beta2"


@pytest.fixture
def kubesim(tmp_path: Path, settings: Any) -> Iterator[KubeSim]:
    fleet = device_plugin_fleet()
    for pool in fleet["pools"]:
        if pool["name"] == "h100":
            pool["topology"] = [{"key": RACK, "nodes": 2}]  # two racks of two nodes
    with running_kubesim(tmp_path, settings, kueue=True, fleet=fleet) as sim:
        yield sim


def _row(pk: int) -> ClusterRequest:
    return ClusterRequest.objects.unscoped().get(pk=pk)


def _racked(h100: Any) -> None:
    """The settings' member registered and h100 given the rack level."""
    KubeCluster.objects.get_or_create(from_settings=True, defaults={"name": "default"})
    h100.topology = [RACK]
    h100.save()


def _ready_gang(alice: Any, acme: Any, h100: Any, name: str, *, workers: int, mode: str) -> Any:
    """alice's production gang on h100 asking the rack level in ``mode``, once ready."""
    spec = ClusterSpec(
        name=name,
        kind="prod",
        flavor=h100,
        workers=workers,
        topology_level=RACK,
        topology_mode=mode,
    )
    gang = services.cluster_request_create(actor=alice, tenant=acme, spec=spec)
    wait_for(lambda: _row(gang.pk).state == "ready", timeout=90, what="admitted and ready")
    return gang


def test_a_required_rack_puts_every_worker_in_the_rack_kueue_chose(
    worker: Any, alice: Any, acme: Any, h100: Any
) -> None:
    _racked(h100)
    gw = get_gateway()
    nodes = {
        n["metadata"]["name"]: n["metadata"]["labels"]
        for n in gw.list("v1", "Node")
        if RACK in n["metadata"]["labels"]
    }
    rack_0 = sorted(name for name, labels in nodes.items() if labels[RACK].endswith("-0"))
    # A pod gangway does not manage takes a node of rack 0: only rack 1 has two free.
    gw.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "squatter", "namespace": "default"},
            "spec": {
                "nodeSelector": {"kubernetes.io/hostname": rack_0[0]},
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
                "containers": [
                    {
                        "name": "c",
                        "image": "busybox",
                        "resources": {"limits": {"nvidia.com/gpu": "8"}},
                    }
                ],
            },
        }
    )
    gang = _ready_gang(alice, acme, h100, "kq-rack", workers=2, mode="required")

    topology = gw.get(KUEUE, "Topology", "h100")
    assert topology is not None
    assert topology["spec"]["levels"] == [{"nodeLabel": RACK}]
    assert gw.get(KUEUE, "ResourceFlavor", "h100")["spec"]["topologyName"] == "h100"
    rc = gw.get("ray.io/v1", "RayCluster", "kq-rack", "gw-acme")
    notes = rc["spec"]["workerGroupSpecs"][0]["template"]["metadata"]["annotations"]
    assert notes["kueue.x-k8s.io/podset-required-topology"] == RACK

    workers = [
        p
        for p in gw.list("v1", "Pod", namespace="gw-acme", label_selector="ray.io/cluster=kq-rack")
        if p["metadata"]["labels"].get("ray.io/node-type") == "worker"
    ]
    assert len(workers) == 2
    racks = {nodes[p["spec"]["nodeName"]][RACK] for p in workers}
    assert len(racks) == 1
    (rack,) = racks
    assert rack.endswith("-1")
    assert _row(gang.pk).topology_domain == rack


def test_a_preferred_rack_too_small_for_the_gang_is_spread_by_kueue_and_pins_nothing(
    worker: Any, alice: Any, acme: Any, h100: Any
) -> None:
    _racked(h100)
    Quota.objects.filter(tenant=acme, flavor=h100).update(gpus=32, borrow_limit=0)
    Tenant.objects.unscoped().filter(pk=acme.pk).update(cpu_quota=0, memory_quota_gib=0)
    gang = _ready_gang(alice, acme, h100, "kq-pref", workers=3, mode="preferred")
    gw = get_gateway()
    rc = gw.get("ray.io/v1", "RayCluster", "kq-pref", "gw-acme")
    notes = rc["spec"]["workerGroupSpecs"][0]["template"]["metadata"]["annotations"]
    assert notes["kueue.x-k8s.io/podset-preferred-topology"] == RACK
    racks = {
        n["metadata"]["name"]: n["metadata"]["labels"].get(RACK) for n in gw.list("v1", "Node")
    }
    workers = [
        p
        for p in gw.list("v1", "Pod", namespace="gw-acme", label_selector="ray.io/cluster=kq-pref")
        if p["metadata"]["labels"].get("ray.io/node-type") == "worker"
    ]
    # Racks of two: Kueue fills one rack and puts the third worker in the other.
    assert sorted(racks[p["spec"]["nodeName"]] for p in workers) in (
        ["h100-rack-0", "h100-rack-0", "h100-rack-1"],
        ["h100-rack-0", "h100-rack-1", "h100-rack-1"],
    )
    # Spread over two racks: pinned to none.
    assert _row(gang.pk).topology_domain == ""
