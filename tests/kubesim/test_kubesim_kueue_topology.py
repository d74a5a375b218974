"""Kueue's Topology Aware Scheduling in kubesim: a TAS ResourceFlavor naming a Topology,
pod sets asking a level through the pod template annotations, the topology assignment Kueue
writes, the pods gated and then ungated onto the assigned nodes, and Kueue's words when a
required level has no domain with room."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubesim_helpers import GPU_TOLERATION, H100, pod_manifest, raycluster

from kubesim import KubeSim

KQ = ("kueue.x-k8s.io", "v1beta2")
RACK = "network.topology.kubernetes.io/rack"
HOST = "kubernetes.io/hostname"
NS = "default"
ASK = {w: f"kueue.x-k8s.io/podset-{w}-topology" for w in ("required", "preferred", "unconstrained")}
FLEET = {
    "name": "t",
    "pools": [
        {
            "name": "cpu",
            "count": 1,
            "allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"},
        },
        {
            "name": "h100",
            "count": 6,
            "labels": {"nvidia.com/gpu.product": H100},
            "allocatable": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8", "pods": "110"},
            "taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}],
            "topology": [{"key": RACK, "nodes": 2}],
        },
    ],
}


@pytest.fixture
def ksim() -> Iterator[KubeSim]:
    s = KubeSim(FLEET, kueue=True).start()
    yield s
    s.stop()


@pytest.fixture
def apis(ksim: KubeSim) -> Iterator[tuple[client.CustomObjectsApi, client.CoreV1Api]]:
    cfg = client.Configuration()
    cfg.host = ksim.url
    api = client.ApiClient(cfg)
    yield client.CustomObjectsApi(api), client.CoreV1Api(api)
    api.close()


def _queues(custom: client.CustomObjectsApi, levels: list[str], check: bool = False) -> None:
    custom.create_cluster_custom_object(
        *KQ,
        "topologies",
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Topology",
            "metadata": {"name": "h100-racks"},
            "spec": {"levels": [{"nodeLabel": key} for key in levels]},
        },
    )
    flavors = [
        ("h100", {"nodeLabels": {"nvidia.com/gpu.product": H100}, "topologyName": "h100-racks"}),
        ("heads", {}),
    ]
    for name, spec in flavors:
        custom.create_cluster_custom_object(
            *KQ,
            "resourceflavors",
            {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
             "metadata": {"name": name}, "spec": spec},
        )  # fmt: skip

    def entry(name: str, cpu: str, gpus: str) -> dict[str, Any]:
        resources = [("cpu", cpu), ("memory", "100Ti"), ("nvidia.com/gpu", gpus)]
        return {
            "name": name,
            "resources": [{"name": r, "nominalQuota": v} for r, v in resources],
        }

    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
                "flavors": [entry("h100", "1000", "48"), entry("heads", "32", "0")],
            }
        ],
    }
    if check:
        _capacity_check(custom)
        spec["admissionChecksStrategy"] = {
            "admissionChecks": [{"name": "capacity", "onFlavors": ["h100"]}]
        }
    custom.create_cluster_custom_object(
        *KQ,
        "clusterqueues",
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": "cq"},
            "spec": spec,
        },
    )
    custom.create_namespaced_custom_object(
        *KQ,
        NS,
        "localqueues",
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": "lq", "namespace": NS},
            "spec": {"clusterQueue": "cq"},
        },
    )


def _capacity_check(custom: client.CustomObjectsApi) -> None:
    """A ProvisioningRequest admission check (capacity on demand)."""
    custom.create_cluster_custom_object(
        *KQ,
        "provisioningrequestconfigs",
        {
            "kind": "ProvisioningRequestConfig",
            "metadata": {"name": "prov"},
            "spec": {
                "provisioningClassName": "best-effort-atomic-scale-up.autoscaling.x-k8s.io",
                "managedResources": ["nvidia.com/gpu"],
            },
        },
    )
    custom.create_cluster_custom_object(
        *KQ,
        "admissionchecks",
        {
            "kind": "AdmissionCheck",
            "metadata": {"name": "capacity"},
            "spec": {
                "controllerName": "kueue.x-k8s.io/provisioning-request",
                "parameters": {
                    "apiGroup": "kueue.x-k8s.io",
                    "kind": "ProvisioningRequestConfig",
                    "name": "prov",
                },
            },
        },
    )


def _gang(name: str, workers: int, annotations: dict[str, str] | None) -> dict[str, Any]:
    rc = raycluster(name, workers=workers, gpus=8, labels={"kueue.x-k8s.io/queue-name": "lq"})
    template = rc["spec"]["workerGroupSpecs"][0]["template"]
    template["spec"]["containers"][0]["resources"] = {
        "requests": {"cpu": "60", "memory": "400Gi", "nvidia.com/gpu": "8"},
        "limits": {"cpu": "60", "memory": "400Gi", "nvidia.com/gpu": "8"},
    }
    if annotations:
        template["metadata"] = {"annotations": annotations}
    return rc


def _create(custom: client.CustomObjectsApi, rc: dict[str, Any]) -> None:
    custom.create_namespaced_custom_object("ray.io", "v1", NS, "rayclusters", rc)


def _workload(custom: client.CustomObjectsApi, rc: str) -> dict[str, Any]:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        items = custom.list_namespaced_custom_object(*KQ, NS, "workloads")["items"]
        mine = [w for w in items if any(o["name"] == rc for o in w["metadata"]["ownerReferences"])]
        conds = (
            {c["type"]: c for c in (mine[0].get("status") or {}).get("conditions") or []}
            if mine
            else {}
        )
        if "QuotaReserved" in conds:
            return mine[0]
        time.sleep(0.05)
    raise AssertionError(f"no verdict on the Workload of {rc}")


def _worker_nodes(core: client.CoreV1Api, rc: str, n: int) -> list[Any]:
    deadline = time.monotonic() + 15
    pods: list[Any] = []
    while time.monotonic() < deadline:
        pods = [
            p
            for p in core.list_namespaced_pod(NS, label_selector=f"ray.io/cluster={rc}").items
            if p.metadata.labels.get("ray.io/node-type") == "worker"
        ]
        if len(pods) == n and all(p.spec.node_name for p in pods):
            return pods
        time.sleep(0.05)
    raise AssertionError(f"{rc}: workers not all bound: {[p.spec.node_name for p in pods]}")


def _rack(core: client.CoreV1Api, node: str) -> str:
    return str(core.read_node(node).metadata.labels[RACK])


def _occupy(core: client.CoreV1Api, node: str) -> None:
    """A pod Kueue does not manage holds ``node``'s GPUs."""
    body = pod_manifest("squatter", gpu=8)
    body["spec"]["nodeSelector"] = {HOST: node}
    body["spec"]["tolerations"] = [dict(GPU_TOLERATION)]
    core.create_namespaced_pod(NS, body)
    deadline = time.monotonic() + 10
    while not core.read_namespaced_pod("squatter", NS).spec.node_name:
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_a_required_rack_is_the_tightest_that_fits_and_the_pods_are_ungated_onto_it(
    apis: tuple[client.CustomObjectsApi, client.CoreV1Api],
) -> None:
    custom, core = apis
    _queues(custom, [RACK, HOST])
    _occupy(core, "t-h100-4")  # rack 2 keeps one free node, racks 0 and 1 two each
    _create(custom, _gang("one", 1, {ASK["required"]: RACK}))
    wl = _workload(custom, "one")
    gpu_set = next(p for p in wl["spec"]["podSets"] if p["name"] == "gpu")
    assert gpu_set["topologyRequest"] == {"required": RACK}
    psa = next(a for a in wl["status"]["admission"]["podSetAssignments"] if a["name"] == "gpu")
    # BestFit: the rack with least room that still takes the pod set.
    assert psa["topologyAssignment"] == {
        "levels": [HOST],
        "slices": [
            {"domainCount": 1, "valuesPerLevel": [{"universal": "t-h100-5"}],
             "podCounts": {"universal": 1}}
        ],
    }  # fmt: skip
    (pod,) = _worker_nodes(core, "one", 1)
    assert pod.spec.node_name == "t-h100-5"
    assert pod.spec.node_selector[HOST] == "t-h100-5"
    assert not pod.spec.scheduling_gates
    assert pod.metadata.labels["kueue.x-k8s.io/tas"] == "true"
    assert pod.metadata.annotations["kueue.x-k8s.io/workload"] == wl["metadata"]["name"]

    # Two whole nodes in one rack: racks 0 and 1 have them; the first by name is taken.
    _create(custom, _gang("two", 2, {ASK["required"]: RACK}))
    _workload(custom, "two")
    pods = _worker_nodes(core, "two", 2)
    assert sorted(p.spec.node_name for p in pods) == ["t-h100-0", "t-h100-1"]
    assert {_rack(core, p.spec.node_name) for p in pods} == {"h100-rack-0"}


def test_a_required_rack_without_room_waits_with_kueues_words_and_preferred_spreads(
    apis: tuple[client.CustomObjectsApi, client.CoreV1Api],
) -> None:
    custom, core = apis
    _queues(custom, [RACK, HOST])
    _occupy(core, "t-h100-0")
    _create(custom, _gang("big", 3, {ASK["required"]: RACK}))
    wl = _workload(custom, "big")
    reserved = next(c for c in wl["status"]["conditions"] if c["type"] == "QuotaReserved")
    assert reserved["status"] == "False"
    assert reserved["message"] == (
        'couldn\'t assign flavors to pod set gpu: topology "h100-racks" allows to fit only '
        '2 out of 3 pod(s). Total nodes: 6; excluded: resource "nvidia.com/gpu": 1, '
        'Flavor "heads" does not support TopologyAwareScheduling'
    )
    assert "admission" not in wl["status"]
    # The RayCluster stays suspended: no worker pod exists.
    assert not core.list_namespaced_pod(NS, label_selector="ray.io/cluster=big").items

    # Preferred: as few racks as fit, the fullest first.
    _create(custom, _gang("wide", 3, {ASK["preferred"]: RACK}))
    _workload(custom, "wide")
    pods = _worker_nodes(core, "wide", 3)
    racks = sorted(_rack(core, p.spec.node_name) for p in pods)
    assert len(set(racks)) == 2


def test_a_pod_set_that_asks_nothing_may_not_take_a_tas_flavor_of_a_mixed_queue(
    apis: tuple[client.CustomObjectsApi, client.CoreV1Api],
) -> None:
    custom, _ = apis
    _queues(custom, [RACK, HOST])
    custom.create_namespaced_custom_object(
        "ray.io", "v1", NS, "rayclusters", _gang("plain", 1, None)
    )
    wl = _workload(custom, "plain")
    reserved = next(c for c in wl["status"]["conditions"] if c["type"] == "QuotaReserved")
    assert reserved["status"] == "False"
    assert 'Flavor "h100" supports only TopologyAwareScheduling' in reserved["message"]
    # Unconstrained: TAS places it anywhere.
    _create(custom, _gang("free", 1, {ASK["unconstrained"]: "true"}))
    wl = _workload(custom, "free")
    psa = next(a for a in wl["status"]["admission"]["podSetAssignments"] if a["name"] == "gpu")
    assert psa["topologyAssignment"]["levels"] == [HOST]


def test_the_topology_waits_while_admission_checks_run(
    apis: tuple[client.CustomObjectsApi, client.CoreV1Api],
) -> None:
    custom, _ = apis
    _queues(custom, [RACK, HOST], check=True)
    _create(custom, _gang("later", 2, {ASK["required"]: RACK}))
    wl = _workload(custom, "later")
    reserved = next(c for c in wl["status"]["conditions"] if c["type"] == "QuotaReserved")
    assert reserved["status"] == "True"
    psa = next(a for a in wl["status"]["admission"]["podSetAssignments"] if a["name"] == "gpu")
    assert psa["delayedTopologyRequest"] == "Pending"
    assert "topologyAssignment" not in psa


def test_the_topology_kinds_are_served_and_validated(
    apis: tuple[client.CustomObjectsApi, client.CoreV1Api],
) -> None:
    custom, _ = apis
    bad = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Topology",
        "metadata": {"name": "bad"},
        "spec": {"levels": [{"nodeLabel": HOST}, {"nodeLabel": RACK}]},
    }
    with pytest.raises(client.ApiException) as err:
        custom.create_cluster_custom_object(*KQ, "topologies", bad)
    assert err.value.status == 422
    assert "can only be used at the lowest level" in err.value.body
    kai = {
        "apiVersion": "kai.scheduler/v1alpha1",
        "kind": "Topology",
        "metadata": {"name": "racks"},
        "spec": {"levels": [{"nodeLabel": RACK}, {"nodeLabel": HOST}]},
    }
    custom.create_cluster_custom_object("kai.scheduler", "v1alpha1", "topologies", kai)
    got = custom.get_cluster_custom_object("kai.scheduler", "v1alpha1", "topologies", "racks")
    assert got["spec"]["levels"][0]["nodeLabel"] == RACK
