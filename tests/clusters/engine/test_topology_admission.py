"""Admission per topology domain through the real loop (worker, kubesim over HTTP): on a
fleet of two racks of 3 H100 nodes, a production cluster that requires one rack is
admitted, pinned to the best-fitting rack, and its workers all run on that rack's nodes
(read with the official Kubernetes client); a second gang larger than any rack's free
nodes waits with the reason that says so, though the flavor has whole nodes enough."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from kubernetes import client, config

from clusters.models import ClusterRequest
from kubesim import KubeSim
from tenants.models import GpuFlavor, Quota, Tenant
from tests.clusters.engine.conftest import running_kubesim, wait_for

CLUSTERS = "/api/v1/tenants/acme/clusters/"
RACK = "network.topology.kubernetes.io/rack"
H100 = "NVIDIA-H100-80GB-HBM3"


@pytest.fixture
def kubesim(tmp_path: Path, settings: Any) -> Iterator[KubeSim]:
    """6 H100 nodes in racks of 3 (h100-rack-0, h100-rack-1) and a CPU node for heads."""
    fleet = {
        "name": "racks",
        "pools": [
            {
                "name": "h100",
                "count": 6,
                "labels": {"nvidia.com/gpu.product": H100},
                "allocatable": {
                    "cpu": "192",
                    "memory": "1800Gi",
                    "nvidia.com/gpu": "8",
                    "pods": "110",
                },
                "taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}],
                "topology": [{"key": RACK, "nodes": 3}],
            },
            {
                "name": "cpu",
                "count": 1,
                "allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"},
            },
        ],
    }
    with running_kubesim(tmp_path, settings, fleet=fleet) as sim:
        yield sim


def _row(name: str) -> ClusterRequest:
    return ClusterRequest.objects.unscoped().get(name=name)


def _worker_racks(api: client.CoreV1Api, pk: int) -> list[str]:
    """The rack of the node under each of the request's worker pods (bound ones)."""
    racks = {n.metadata.name: n.metadata.labels.get(RACK) for n in api.list_node().items}
    pods = api.list_pod_for_all_namespaces(
        label_selector=f"gangway.dev/cluster-id={pk},ray.io/node-type=worker"
    ).items
    return [racks[p.spec.node_name] for p in pods if p.spec.node_name]


def test_a_gang_that_requires_a_rack_runs_in_one_and_one_that_fits_none_waits(
    worker: Any, kubesim: Any, settings: Any, as_user: Any, alice: Any, acme: Any, h100: Any
) -> None:
    GpuFlavor.objects.filter(pk=h100.pk).update(node_count=6, topology=[RACK])
    Quota.objects.filter(tenant=acme, flavor=h100).update(gpus=64, borrow_limit=0)
    # Whole nodes' CPU and memory: no tenant limit on them here.
    Tenant.objects.unscoped().filter(pk=acme.pk).update(cpu_quota=0, memory_quota_gib=0)
    # Admission checks domains once the reconciler has said where the free nodes are.
    wait_for(
        lambda: (
            (GpuFlavor.objects.get(pk=h100.pk).observed_free_domains or {}).get("levels") == [RACK]
        ),
        what="the reconciler's free nodes per rack",
    )
    api = as_user(alice)
    first = {
        "name": "first",
        "kind": "prod",
        "flavor": "h100",
        "workers": 2,
        "topology_level": RACK,
        "topology_mode": "required",
    }
    assert api.post(CLUSTERS, first, format="json").status_code == 201
    row = wait_for(lambda: (r := _row("first")).state == "ready" and r, what="first ready")
    # Both racks have 3 free: the tie goes to the first by name.
    assert row.topology_domain == "h100-rack-0"
    body = api.get(CLUSTERS + "first/").json()
    assert body["topology_domain"] == "h100-rack-0"

    page = Client()
    page.force_login(alice)
    html = page.get("/t/acme/clusters/first/").content.decode()
    assert 'data-topology-domain="h100-rack-0"' in html
    assert "Workers pinned to <strong>h100-rack-0</strong>" in html

    core = client.CoreV1Api(config.new_client_from_config(config_file=settings.KUBECONFIG))
    assert _worker_racks(core, row.pk) == ["h100-rack-0", "h100-rack-0"]
    manifest = api.get(CLUSTERS + "first/manifests/").json()
    (raycluster,) = [m for m in manifest["manifests"] if m["kind"] == "RayCluster"]
    terms = raycluster["spec"]["workerGroupSpecs"][0]["template"]["spec"]["affinity"][
        "nodeAffinity"
    ]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert all(
        {"key": RACK, "operator": "In", "values": ["h100-rack-0"]} in t["matchExpressions"]
        for t in terms
    )

    # 4 whole nodes are free (1 in rack-0, 3 in rack-1), but no rack has 4.
    second = {**first, "name": "second", "workers": 4}
    assert api.post(CLUSTERS, second, format="json").status_code == 201
    waiting = wait_for(
        lambda: (r := _row("second")).queue_reason and r, what="second's queue reason"
    )
    assert waiting.state == "queued"
    assert waiting.queue_reason == "capacity", waiting.queue_message
    assert waiting.queue_message == (
        "No room in one rack: this cluster needs 4 whole nodes in one rack "
        f"({RACK}); the emptiest rack has 3 free."
    )
    queue = api.get(CLUSTERS + "second/").json()["queue"]
    assert queue["reason"] == "capacity"
    assert "the emptiest rack has 3 free" in queue["message"]


def test_gangs_that_ask_no_rack_are_packed_into_the_fullest_rack_with_room(
    worker: Any, kubesim: Any, settings: Any, as_user: Any, alice: Any, acme: Any, h100: Any
) -> None:
    GpuFlavor.objects.filter(pk=h100.pk).update(node_count=6, topology=[RACK])
    Quota.objects.filter(tenant=acme, flavor=h100).update(gpus=64, borrow_limit=0)
    Tenant.objects.unscoped().filter(pk=acme.pk).update(cpu_quota=0, memory_quota_gib=0)
    wait_for(
        lambda: (
            (GpuFlavor.objects.get(pk=h100.pk).observed_free_domains or {}).get("levels") == [RACK]
        ),
        what="the reconciler's free nodes per rack",
    )
    api = as_user(alice)
    core = client.CoreV1Api(config.new_client_from_config(config_file=settings.KUBECONFIG))
    one = {"name": "one", "kind": "prod", "flavor": "h100", "workers": 1}
    assert api.post(CLUSTERS, one, format="json").status_code == 201
    row = wait_for(lambda: (r := _row("one")).state == "ready" and r, what="one ready")
    # Both racks have 3 free: packed into the first by name, though it asked for nothing.
    assert (row.topology_level, row.topology_domain) == ("", "h100-rack-0")
    assert _worker_racks(core, row.pk) == ["h100-rack-0"]

    # Rack 0 has 2 free, rack 1 has 3: a gang of 2 fits both, and goes where it leaves
    # rack 1 whole.
    created = api.post(CLUSTERS, {**one, "name": "two", "workers": 2}, format="json")
    assert created.status_code == 201
    two = wait_for(lambda: (r := _row("two")).state == "ready" and r, what="two ready")
    assert two.topology_domain == "h100-rack-0"
    assert _worker_racks(core, two.pk) == ["h100-rack-0", "h100-rack-0"]
    assert api.get(CLUSTERS + "two/").json()["topology_domain"] == "h100-rack-0"
    assert two.events.filter(message__contains="packed into rack h100-rack-0").exists()
    manifest = api.get(CLUSTERS + "two/manifests/").json()
    (raycluster,) = [m for m in manifest["manifests"] if m["kind"] == "RayCluster"]
    node = raycluster["spec"]["workerGroupSpecs"][0]["template"]["spec"]["affinity"]["nodeAffinity"]
    # Preferred only: it asked for nothing, so it may still run anywhere.
    assert node["preferredDuringSchedulingIgnoredDuringExecution"] == [
        {
            "weight": 100,
            "preference": {
                "matchExpressions": [{"key": RACK, "operator": "In", "values": ["h100-rack-0"]}]
            },
        }
    ]
    assert RACK not in str(node.get("requiredDuringSchedulingIgnoredDuringExecution", {}))
    page = Client()
    page.force_login(alice)
    html = page.get("/t/acme/clusters/two/").content.decode()
    assert "Workers packed into <strong>h100-rack-0</strong>" in html
