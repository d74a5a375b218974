"""Admission per topology domain through the real loop (worker, kubesim over HTTP): on a
fleet of two racks of 3 H100 nodes, a production cluster that requires one rack is
admitted, pinned to the best-fitting rack, and its workers all run on that rack's nodes
(read with the official Kubernetes client); a gang larger than any rack is refused as
never fitting, and one larger than any rack's free nodes waits with the reason that says
so."""

from __future__ import annotations

import subprocess
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
from tests.kubesim.conftest import KUBECTL

CLUSTERS = "/api/v1/tenants/acme/clusters/"
RACK = "network.topology.kubernetes.io/rack"
H100 = "NVIDIA-H100-80GB-HBM3"


@pytest.fixture
def kubesim(tmp_path: Path, settings: Any, request: pytest.FixtureRequest) -> Iterator[KubeSim]:
    """6 H100 nodes in racks of 3 (h100-rack-0, h100-rack-1) and a CPU node for heads;
    with KAI's scheduler and ``KAI_ENABLED`` when the test is marked ``kai``."""
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
    kai = request.node.get_closest_marker("kai") is not None
    with running_kubesim(tmp_path, settings, fleet=fleet, kai=kai) as sim:
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


def _racked(acme: Any, h100: Any) -> None:
    """h100 with the rack level, room in acme's quota, and the reconciler's free nodes
    per rack observed (admission checks domains once it knows them)."""
    GpuFlavor.objects.filter(pk=h100.pk).update(node_count=6, topology=[RACK])
    Quota.objects.filter(tenant=acme, flavor=h100).update(gpus=64, borrow_limit=0)
    # Whole nodes' CPU and memory: no tenant limit on them here.
    Tenant.objects.unscoped().filter(pk=acme.pk).update(cpu_quota=0, memory_quota_gib=0)
    wait_for(
        lambda: (
            (GpuFlavor.objects.get(pk=h100.pk).observed_free_domains or {}).get("levels") == [RACK]
        ),
        what="the reconciler's free nodes per rack",
    )


def test_a_gang_that_requires_a_rack_runs_in_one_and_one_that_fits_none_waits(
    worker: Any, kubesim: Any, settings: Any, as_user: Any, alice: Any, acme: Any, h100: Any
) -> None:
    _racked(acme, h100)
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
    # kubectl shows it too: the workers' nodes, and those nodes' rack label.
    kubectl = [KUBECTL, "--kubeconfig", settings.KUBECONFIG]
    selector = f"gangway.dev/cluster-id={row.pk},ray.io/node-type=worker"
    nodes = subprocess.run(
        [*kubectl, "get", "pods", "-A", "-l", selector, "-o", "jsonpath={.items[*].spec.nodeName}"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    label = RACK.replace(".", "\\.")  # a JSONPath key's dots escaped
    racks = subprocess.run(
        [*kubectl, "get", "nodes", *nodes, "-o", f"jsonpath={{.items[*].metadata.labels.{label}}}"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert len(nodes) == 2 and racks == ["h100-rack-0", "h100-rack-0"], (nodes, racks)
    manifest = api.get(CLUSTERS + "first/manifests/").json()
    (raycluster,) = [m for m in manifest["manifests"] if m["kind"] == "RayCluster"]
    terms = raycluster["spec"]["workerGroupSpecs"][0]["template"]["spec"]["affinity"][
        "nodeAffinity"
    ]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert all(
        {"key": RACK, "operator": "In", "values": ["h100-rack-0"]} in t["matchExpressions"]
        for t in terms
    )

    # No rack has 4 nodes at all: a gang of 4 that requires one is refused, nothing made.
    refused = api.post(CLUSTERS, {**first, "name": "four", "workers": 4}, format="json")
    assert refused.status_code == 400, refused.content
    assert refused.json()["error"]["code"] == "never_fits"
    assert "the largest rack of h100 has 3 nodes" in refused.content.decode()
    assert not ClusterRequest.objects.unscoped().filter(name="four").exists()

    # Rack 1 takes another gang of 2; then 1 node is free in each rack.
    third = {**first, "name": "third", "workers": 2}
    assert api.post(CLUSTERS, third, format="json").status_code == 201
    wait_for(lambda: _row("third").state == "ready", what="third ready")
    assert _row("third").topology_domain == "h100-rack-1"
    # 2 whole nodes are free, but in two racks: a gang of 2 that requires one waits.
    second = {**first, "name": "second", "workers": 2}
    assert api.post(CLUSTERS, second, format="json").status_code == 201
    waiting = wait_for(
        lambda: (r := _row("second")).queue_reason and r, what="second's queue reason"
    )
    assert waiting.state == "queued"
    assert waiting.queue_reason == "capacity", waiting.queue_message
    assert waiting.queue_message == (
        "No room in one rack: this cluster needs 2 whole nodes in one rack "
        f"({RACK}); the emptiest rack has 1 free."
    )
    queue = api.get(CLUSTERS + "second/").json()["queue"]
    assert queue["reason"] == "capacity"
    assert "the emptiest rack has 1 free" in queue["message"]


def test_gangs_that_ask_no_rack_are_packed_into_the_fullest_rack_with_room(
    worker: Any, kubesim: Any, settings: Any, as_user: Any, alice: Any, acme: Any, h100: Any
) -> None:
    _racked(acme, h100)
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


@pytest.mark.kai
def test_with_kai_a_gang_that_prefers_a_rack_is_pinned_there_and_tells_kai(
    worker: Any, kubesim: Any, settings: Any, as_user: Any, alice: Any, acme: Any, h100: Any
) -> None:
    _racked(acme, h100)
    api = as_user(alice)
    body = {
        "name": "pref",
        "kind": "prod",
        "flavor": "h100",
        "workers": 3,
        "topology_level": RACK,
        "topology_mode": "preferred",
    }
    assert api.post(CLUSTERS, body, format="json").status_code == 201
    row = wait_for(lambda: (r := _row("pref")).state == "ready" and r, what="pref ready")
    assert row.topology_domain == "h100-rack-0"
    api_client = config.new_client_from_config(config_file=settings.KUBECONFIG)
    core = client.CoreV1Api(api_client)
    assert _worker_racks(core, row.pk) == ["h100-rack-0"] * 3
    custom = client.CustomObjectsApi(api_client)
    # KAI's Topology of the flavor, and the placement its pod grouper reads on the owner.
    topo = custom.get_cluster_custom_object("kai.scheduler", "v1alpha1", "topologies", "h100")
    assert [level["nodeLabel"] for level in topo["spec"]["levels"]] == [RACK]
    rc = custom.get_namespaced_custom_object("ray.io", "v1", row.namespace, "rayclusters", row.name)
    annotations = rc["metadata"]["annotations"]
    assert annotations["kai.scheduler/topology"] == "h100"
    assert annotations["kai.scheduler/topology-preferred-placement"] == RACK
