"""Kueue's DRA accounting in kubesim: a worker's ResourceClaimTemplate devices count
against the ClusterQueue quota of the resource the Configuration's deviceClassMappings
maps their DeviceClass to; a gang beyond it waits with Kueue's words; an unmapped class
or a form Kueue does not count leaves the Workload inadmissible; an invalid mapping is
refused at start. KAI: a kai-scheduler pod's claim is allocated through the DRA driver."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client
from kubesim_helpers import GPU_TOLERATION, H100, MIG_FLEET, container

from kubesim import KubeSim
from kubesim.operators.kueue.devices import parse_mappings

KQ = ("kueue.x-k8s.io", "v1beta2")
CONFIG = {
    "apiVersion": "config.kueue.x-k8s.io/v1beta2",
    "kind": "Configuration",
    "resources": {
        "deviceClassMappings": [
            {"name": "mig.nvidia.com", "deviceClassNames": ["mig.nvidia.com"]},
            {"name": "gpu.nvidia.com", "deviceClassNames": ["gpu.nvidia.com"]},
        ]
    },
}
PROFILE = 'device.attributes["gpu.nvidia.com"].profile == "1g.10gb"'
MIG = "mig.nvidia.com"


def _start(**options: Any) -> KubeSim:
    return KubeSim(fleet=MIG_FLEET, startup_delay=0.0, **options).start()


@pytest.fixture
def api() -> Iterator[Callable[..., client.ApiClient]]:
    """Start a simulator with the given options; its ApiClient (both closed after)."""
    opened: list[tuple[KubeSim, client.ApiClient]] = []

    def start(**options: Any) -> client.ApiClient:
        sim = _start(**options)
        cfg = client.Configuration()
        cfg.host = sim.url
        opened.append((sim, client.ApiClient(cfg)))
        return opened[-1][1]

    yield start
    for sim, api_client in opened:
        api_client.close()
        sim.stop()


def _queues(api: client.ApiClient, mig_quota: int) -> None:
    """Flavors h100 (MIG devices) and cpu (heads), a ClusterQueue over cpu, memory and
    the mapped MIG resource, and a LocalQueue in namespace ``t``."""
    custom = client.CustomObjectsApi(api)
    for name, labels in (("h100", {"nvidia.com/gpu.product": H100}), ("cpu", {})):
        custom.create_cluster_custom_object(
            *KQ,
            "resourceflavors",
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "ResourceFlavor",
                "metadata": {"name": name},
                "spec": {"nodeLabels": labels} if labels else {},
            },
        )

    def flavor(name: str, cpu: str, mig: int) -> dict[str, Any]:
        return {
            "name": name,
            "resources": [
                {"name": "cpu", "nominalQuota": cpu},
                {"name": "memory", "nominalQuota": "1Ti"},
                {"name": MIG, "nominalQuota": mig},
            ],
        }

    custom.create_cluster_custom_object(
        *KQ,
        "clusterqueues",
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": "cq"},
            "spec": {
                "namespaceSelector": {},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu", "memory", MIG],
                        "flavors": [flavor("h100", "64", mig_quota), flavor("cpu", "32", 0)],
                    }
                ],
            },
        },
    )
    client.CoreV1Api(api).create_namespace({"metadata": {"name": "t"}})
    custom.create_namespaced_custom_object(
        *KQ,
        "t",
        "localqueues",
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": "lq"},
            "spec": {"clusterQueue": "cq"},
        },
    )


def _template(api: client.ApiClient, name: str, exactly: dict[str, Any]) -> None:
    client.ResourceV1Api(api).create_namespaced_resource_claim_template(
        "t",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": name},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpus", "exactly": exactly}]}}},
        },
    )


def _raycluster(name: str, template: str, workers: int = 1) -> dict[str, Any]:
    """A queued RayCluster whose workers each claim from ``template`` (no nvidia.com/gpu)."""
    worker = container("ray-worker", cpu="4", memory="16Gi")
    worker["resources"]["claims"] = [{"name": "gpus"}]
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": name, "namespace": "t", "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
        "spec": {
            "headGroupSpec": {
                "rayStartParams": {"num-gpus": "0"},
                "template": {
                    "spec": {"containers": [container("ray-head", cpu="2", memory="8Gi")]}
                },
            },
            "workerGroupSpecs": [
                {
                    "groupName": "gpu",
                    "replicas": workers,
                    "minReplicas": workers,
                    "maxReplicas": workers,
                    "rayStartParams": {"num-gpus": "2"},
                    "template": {
                        "spec": {
                            "containers": [worker],
                            "resourceClaims": [
                                {"name": "gpus", "resourceClaimTemplateName": template}
                            ],
                            "nodeSelector": {"nvidia.com/gpu.product": H100},
                            "tolerations": [dict(GPU_TOLERATION)],
                        }
                    },
                }
            ],
        },
    }


def _workload(api: client.ApiClient, cluster: str, timeout: float = 10.0) -> dict[str, Any]:
    """The Workload of RayCluster ``cluster`` once Kueue decided on it (a condition)."""
    custom = client.CustomObjectsApi(api)
    deadline = time.monotonic() + timeout
    while True:
        for wl in custom.list_namespaced_custom_object(*KQ, "t", "workloads")["items"]:
            owners = [o["name"] for o in wl["metadata"].get("ownerReferences") or []]
            if cluster in owners and (wl.get("status") or {}).get("conditions"):
                return dict(wl)
        assert time.monotonic() < deadline, f"no decided Workload for {cluster}"
        time.sleep(0.05)


def _quota_reserved(wl: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in wl["status"]["conditions"] if c["type"] == "QuotaReserved")


def _pods(api: client.ApiClient, group: str) -> list[Any]:
    pods = client.CoreV1Api(api).list_namespaced_pod("t").items
    return [p for p in pods if (p.metadata.labels or {}).get("ray.io/group") == group]


def test_mig_devices_count_against_the_mapped_quota_and_a_gang_beyond_waits(
    api: Callable[..., client.ApiClient],
) -> None:
    k = api(kueue=True, kueue_config=CONFIG)
    _queues(k, mig_quota=3)
    _template(
        k,
        "two-slices",
        {"deviceClassName": MIG, "count": 2, "selectors": [{"cel": {"expression": PROFILE}}]},
    )
    custom = client.CustomObjectsApi(k)
    custom.create_namespaced_custom_object(
        "ray.io", "v1", "t", "rayclusters", _raycluster("a", "two-slices")
    )
    wl = _workload(k, "a")
    assert _quota_reserved(wl)["status"] == "True"
    workers = next(a for a in wl["status"]["admission"]["podSetAssignments"] if a["name"] == "gpu")
    assert workers["flavors"][MIG] == "h100"
    assert workers["resourceUsage"][MIG] == "2"  # the template's count, per pod
    # The admitted worker's claim is allocated by the DRA driver: two 1g.10gb slices.
    deadline = time.monotonic() + 10
    while not (pods := _pods(k, "gpu")) or pods[0].status.phase != "Running":
        assert time.monotonic() < deadline, "the admitted worker never ran"
        time.sleep(0.05)
    claims = client.ResourceV1Api(k).list_namespaced_resource_claim("t").items
    assert len(claims) == 1 and len(claims[0].status.allocation.devices.results) == 2

    # Two more slices would make 4 of a quota of 3: Kueue keeps the gang queued.
    custom.create_namespaced_custom_object(
        "ray.io", "v1", "t", "rayclusters", _raycluster("b", "two-slices")
    )
    waiting = _quota_reserved(_workload(k, "b"))
    assert (waiting["status"], waiting["reason"]) == ("False", "Pending")
    assert waiting["message"].startswith(
        "couldn't assign flavors to pod set gpu: insufficient unused quota for mig.nvidia.com"
    )
    cq = custom.get_cluster_custom_object(*KQ, "clusterqueues", "cq")
    usage = {
        r["name"]: r["total"]
        for f in cq["status"]["flavorsUsage"]
        if f["name"] == "h100"
        for r in f["resources"]
    }
    assert usage[MIG] == "2"


def test_an_unmapped_device_class_leaves_the_workload_inadmissible(
    api: Callable[..., client.ApiClient],
) -> None:
    k = api(kueue=True)  # no deviceClassMappings
    _queues(k, mig_quota=8)
    _template(k, "slice", {"deviceClassName": MIG, "count": 1})
    client.CustomObjectsApi(k).create_namespaced_custom_object(
        "ray.io", "v1", "t", "rayclusters", _raycluster("a", "slice")
    )
    reserved = _quota_reserved(_workload(k, "a"))
    assert (reserved["status"], reserved["reason"]) == ("False", "Inadmissible")
    assert reserved["message"] == (
        "spec.podSets[1].template.spec.resourceClaims[0].resourceClaimTemplateName."
        'deviceClassName: Not found: "mig.nvidia.com"'
    )
    assert not _pods(k, "gpu")  # the RayCluster stays suspended


def test_allocation_mode_all_is_not_counted(api: Callable[..., client.ApiClient]) -> None:
    k = api(kueue=True, kueue_config=CONFIG)
    _queues(k, mig_quota=8)
    _template(k, "all", {"deviceClassName": MIG, "allocationMode": "All"})
    client.CustomObjectsApi(k).create_namespaced_custom_object(
        "ray.io", "v1", "t", "rayclusters", _raycluster("a", "all")
    )
    reserved = _quota_reserved(_workload(k, "a"))
    assert reserved["reason"] == "Inadmissible"
    assert reserved["message"].endswith(
        'devices.requests[0].exactly.allocationMode: Invalid value: "All": '
        "ResourceClaimTemplate all: AllocationMode 'All' is not supported"
    )


@pytest.mark.parametrize(
    ("mappings", "words"),
    [
        (
            [
                {"name": "slices", "deviceClassNames": [MIG]},
                {"name": "more-slices", "deviceClassNames": [MIG]},
            ],
            "device class already mapped to resource slices",
        ),
        ([{"name": "slices", "deviceClassNames": []}], "at least one device class name"),
        ([{"name": "-bad", "deviceClassNames": [MIG]}], "must be a qualified name"),
    ],
)
def test_an_invalid_mapping_is_refused_as_kueue_refuses_to_start(
    mappings: list[dict[str, Any]], words: str
) -> None:
    with pytest.raises(ValueError, match=words):
        parse_mappings({"resources": {"deviceClassMappings": mappings}})
    with pytest.raises(ValueError, match=words):
        KubeSim(
            fleet=MIG_FLEET,
            kueue=True,
            kueue_config={"resources": {"deviceClassMappings": mappings}},
        )


def test_a_kai_scheduled_pod_gets_its_claim_from_the_dra_driver(
    api: Callable[..., client.ApiClient],
) -> None:
    k = api(kai=True)
    client.CoreV1Api(k).create_namespace({"metadata": {"name": "t"}})
    _template(
        k,
        "slice",
        {"deviceClassName": MIG, "count": 1, "selectors": [{"cel": {"expression": PROFILE}}]},
    )
    main = container("main", cpu="1", memory="1Gi")
    main["resources"]["claims"] = [{"name": "gpus"}]
    client.CoreV1Api(k).create_namespaced_pod(
        "t",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p"},
            "spec": {
                "schedulerName": "kai-scheduler",
                "containers": [main],
                "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": "slice"}],
                "tolerations": [dict(GPU_TOLERATION)],
            },
        },
    )
    deadline = time.monotonic() + 10
    while (pod := client.CoreV1Api(k).read_namespaced_pod("p", "t")).status.phase != "Running":
        assert time.monotonic() < deadline, "the KAI pod never ran"
        time.sleep(0.05)
    assert pod.spec.node_name == "mig-h100-0"
    (claim,) = client.ResourceV1Api(k).list_namespaced_resource_claim("t").items
    (result,) = claim.status.allocation.devices.results
    assert "mig-1g10gb" in result.device
