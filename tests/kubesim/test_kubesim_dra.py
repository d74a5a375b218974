"""DRA (resource.k8s.io/v1) in kubesim: discovery, the simulated NVIDIA driver's slices,
template claims allocated by the scheduler and handed to containers, MIG partitions on
shared counters, unallocatable claims and the API server's validation."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from subprocess import CompletedProcess
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException
from kubesim_helpers import GPU_TOLERATION

from kubesim import KubeSim

Kubectl = Callable[..., CompletedProcess[str]]
H100_LABELS = {
    "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
    "nvidia.com/gpu.count": "2",
    "nvidia.com/gpu.memory": "81559",
}
FLEET: dict[str, Any] = {
    "name": "dra",
    "pools": [
        {
            "name": "h100",
            "count": 1,
            "labels": H100_LABELS,
            # No nvidia.com/gpu: the DRA driver, not the device plugin, manages its GPUs.
            "allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110"},
            "taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}],
            "mig": {"profile": "1g.10gb", "perGpu": 7},
        },
        {
            "name": "l4",
            "count": 1,
            "labels": {
                "nvidia.com/gpu.product": "NVIDIA-L4",
                "nvidia.com/gpu.count": "1",
                "nvidia.com/gpu.memory": "23034",
            },
            "allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110"},
            "taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}],
        },
        {"name": "cpu", "count": 1, "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}},
    ],
}
L4_SELECTOR = "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA L4'"


@pytest.fixture
def sim() -> Iterator[KubeSim]:
    """A simulator on a small DRA fleet: one 2 x H100 node in MIG 1g.10gb x 7, one L4 node."""
    s = KubeSim(fleet=FLEET, startup_delay=0.0).start()
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture
def resource(kube_api: client.ApiClient) -> client.ResourceV1Api:
    """ResourceV1Api on the simulator."""
    return client.ResourceV1Api(kube_api)


def _claim_spec(cls: str, count: int = 1, selector: str | None = None) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": cls, "count": count}
    if selector:
        exactly["selectors"] = [{"cel": {"expression": selector}}]
    return {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}


def _pod(name: str, claim: dict[str, str]) -> dict[str, Any]:
    """A pod whose ``main`` container uses the claim ``gpu`` and whose sidecar does not."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "tolerations": [GPU_TOLERATION],
            "resourceClaims": [{"name": "gpu", **claim}],
            "containers": [
                {"name": "main", "image": "busybox", "resources": {"claims": [{"name": "gpu"}]}},
                {"name": "sidecar", "image": "busybox"},
            ],
        },
    }


def _slice_devices(sim: KubeSim, node: str) -> dict[str, dict[str, Any]]:
    (sl,) = [
        s for s in sim.list("resourceslices.resource.k8s.io", "") if s["spec"]["nodeName"] == node
    ]
    return {d["name"]: d for d in sl["spec"]["devices"]}


def test_discovery_classes_and_slices(
    kubectl: Kubectl, resource: client.ResourceV1Api, sim: KubeSim
) -> None:
    out = kubectl("api-resources", "--api-group=resource.k8s.io", "-o", "name").stdout.split()
    assert sorted(out) == [
        "deviceclasses.resource.k8s.io",
        "resourceclaims.resource.k8s.io",
        "resourceclaimtemplates.resource.k8s.io",
        "resourceslices.resource.k8s.io",
    ]
    classes = {c.metadata.name: c for c in resource.list_device_class().items}
    assert set(classes) == {"gpu.nvidia.com", "mig.nvidia.com"}
    assert classes["mig.nvidia.com"].spec.selectors[0].cel.expression == (
        "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'"
    )
    slices = resource.list_resource_slice().items
    assert sorted(s.spec.node_name for s in slices) == ["dra-h100-0", "dra-l4-0"]
    assert {(s.spec.driver, s.spec.pool.name) for s in slices} == {
        ("gpu.nvidia.com", "dra-h100-0"),
        ("gpu.nvidia.com", "dra-l4-0"),
    }
    h100 = _slice_devices(sim, "dra-h100-0")
    assert len(h100) == 2 + 2 * 7
    gpu0 = h100["gpu-0"]["attributes"]
    assert gpu0["productName"] == {"string": "NVIDIA H100 80GB HBM3"}
    assert gpu0["architecture"] == {"string": "Hopper"}
    assert gpu0["cudaComputeCapability"] == {"version": "9.0.0"}
    assert gpu0["type"] == {"string": "gpu"} and gpu0["uuid"]["string"].startswith("GPU-")
    mig = h100["gpu-1-mig-1g10gb-3"]["attributes"]
    assert mig["type"] == {"string": "mig"} and mig["profile"] == {"string": "1g.10gb"}
    assert mig["parentUUID"] == h100["gpu-1"]["attributes"]["uuid"]
    assert mig["uuid"]["string"].startswith("MIG-")
    assert h100["gpu-1-mig-1g10gb-3"]["consumesCounters"][0]["counterSet"] == "gpu-1-counter-set"
    l4 = _slice_devices(sim, "dra-l4-0")
    assert list(l4) == ["gpu-0"] and "consumesCounters" not in l4["gpu-0"]
    assert l4["gpu-0"]["attributes"]["cudaComputeCapability"] == {"version": "8.9.0"}
    shown = kubectl("get", "resourceslices", "-o", "name").stdout.split()
    assert len(shown) == 2
    mine = resource.list_resource_slice(field_selector="spec.nodeName=dra-l4-0").items
    assert [s.spec.node_name for s in mine] == ["dra-l4-0"]
    with pytest.raises(ApiException) as exc:
        resource.list_resource_slice(field_selector="spec.pool.name=dra-l4-0")
    assert exc.value.status == 400


def test_template_claim_pod_gets_only_its_gpu(
    kubectl: Kubectl, core: client.CoreV1Api, sim: KubeSim, tmp_path: Path
) -> None:
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "one-l4", "namespace": "default"},
        "spec": {"spec": _claim_spec("gpu.nvidia.com", selector=L4_SELECTOR)},
    }
    path = tmp_path / "rct.yaml"
    path.write_text(yaml.safe_dump(template))
    assert "created" in kubectl("apply", "-f", str(path)).stdout
    core.create_namespaced_pod("default", _pod("w", {"resourceClaimTemplateName": "one-l4"}))
    pod = sim.get("pods", "default", "w")
    assert pod["status"]["phase"] == "Running" and pod["spec"]["nodeName"] == "dra-l4-0"
    (st,) = pod["status"]["resourceClaimStatuses"]
    assert st["name"] == "gpu" and st["resourceClaimName"].startswith("w-gpu-")
    claim = sim.get("resourceclaims.resource.k8s.io", "default", st["resourceClaimName"])
    assert claim["metadata"]["annotations"]["resource.kubernetes.io/pod-claim-name"] == "gpu"
    (owner,) = claim["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("Pod", "w", True)
    alloc = claim["status"]["allocation"]
    assert alloc["devices"]["results"] == [
        {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "dra-l4-0", "device": "gpu-0"}
    ]
    fields = alloc["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"]
    assert fields == [{"key": "metadata.name", "operator": "In", "values": ["dra-l4-0"]}]
    assert claim["status"]["reservedFor"] == [
        {"resource": "pods", "name": "w", "uid": pod["metadata"]["uid"]}
    ]
    assert claim["status"]["devices"] == [
        {"driver": "gpu.nvidia.com", "pool": "dra-l4-0", "device": "gpu-0"}
    ]
    uuid = _slice_devices(sim, "dra-l4-0")["gpu-0"]["attributes"]["uuid"]["string"]
    ann = pod["metadata"]["annotations"]
    assert json.loads(ann["kubesim.io/nvidia-visible-devices"]) == {"main": uuid, "sidecar": "void"}
    cdi = json.loads(ann["kubesim.io/cdi-devices"])
    assert cdi == {"main": [f"k8s.gpu.nvidia.com/claim={claim['metadata']['uid']}-gpu-0"]}
    got = kubectl("get", "resourceclaims", "-o", "jsonpath={.items[*].metadata.name}").stdout
    assert got == st["resourceClaimName"]
    header, row = kubectl("get", "resourceclaims").stdout.strip().splitlines()
    assert header.split() == ["NAME", "STATE", "AGE"]
    assert row.split()[:2] == [st["resourceClaimName"], "allocated,reserved"]
    header, row = kubectl("get", "resourceslices").stdout.strip().splitlines()[:2]
    assert header.split() == ["NAME", "NODE", "DRIVER", "POOL", "AGE"]
    kubectl("delete", "pod", "w")
    assert sim.list("resourceclaims.resource.k8s.io", "default") == []


def test_mig_claim_takes_a_partition_and_its_parents_counters(
    resource: client.ResourceV1Api, core: client.CoreV1Api, sim: KubeSim
) -> None:
    spec = _claim_spec(
        "mig.nvidia.com", selector="device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"
    )
    resource.create_namespaced_resource_claim(
        "default", {"metadata": {"name": "slice"}, "spec": spec}
    )
    before = sim.cluster.dra.available_counters("dra-h100-0")
    core.create_namespaced_pod("default", _pod("dev", {"resourceClaimName": "slice"}))
    pod = sim.get("pods", "default", "dev")
    assert pod["status"]["phase"] == "Running" and pod["spec"]["nodeName"] == "dra-h100-0"
    claim = resource.read_namespaced_resource_claim("slice", "default")
    (res,) = claim.status.allocation.devices.results
    devices = _slice_devices(sim, "dra-h100-0")
    attrs = devices[res.device]["attributes"]
    assert attrs["type"] == {"string": "mig"} and attrs["profile"] == {"string": "1g.10gb"}
    parent = next(n for n, d in devices.items() if d["attributes"]["uuid"] == attrs["parentUUID"])
    cset = f"{parent}-counter-set"
    after = sim.cluster.dra.available_counters("dra-h100-0")
    assert after[cset]["multiprocessors"] == before[cset]["multiprocessors"] - 18
    assert sum(after[cset][f"memory-slice-{i}"] for i in range(8)) == 7
    visible = json.loads(pod["metadata"]["annotations"]["kubesim.io/nvidia-visible-devices"])
    assert visible["main"] == attrs["uuid"]["string"]
    # Both whole GPUs of the node: the partitioned one is no longer whole.
    resource.create_namespaced_resource_claim(
        "default", {"metadata": {"name": "both"}, "spec": _claim_spec("gpu.nvidia.com", count=2)}
    )
    core.create_namespaced_pod("default", _pod("big", {"resourceClaimName": "both"}))
    big = sim.get("pods", "default", "big")
    assert big["status"]["phase"] == "Pending"
    assert "cannot allocate all claims" in big["status"]["conditions"][0]["message"]
    # The partition's pod goes: its claim is deallocated, and the whole GPUs fit.
    core.delete_namespaced_pod("dev", "default")
    freed = resource.read_namespaced_resource_claim("slice", "default")
    assert freed.status is None or freed.status.allocation is None
    assert sim.get("pods", "default", "big")["spec"]["nodeName"] == "dra-h100-0"


def test_claim_for_more_devices_than_exist_stays_pending(
    resource: client.ResourceV1Api, core: client.CoreV1Api, sim: KubeSim
) -> None:
    resource.create_namespaced_resource_claim(
        "default", {"metadata": {"name": "five"}, "spec": _claim_spec("gpu.nvidia.com", count=5)}
    )
    core.create_namespaced_pod("default", _pod("greedy", {"resourceClaimName": "five"}))
    pod = sim.get("pods", "default", "greedy")
    assert pod["status"]["phase"] == "Pending" and not pod["spec"].get("nodeName")
    cond = pod["status"]["conditions"][0]
    assert (cond["type"], cond["status"], cond["reason"]) == (
        "PodScheduled",
        "False",
        "Unschedulable",
    )
    assert cond["message"].startswith("0/3 nodes are available: ")
    # The CPU node is tolerated too; no node has 5 GPUs.
    assert cond["message"] == (
        "0/3 nodes are available: 3 cannot allocate all claims. preemption: 0/3 nodes are "
        "available: 3 No preemption victims found for incoming pod."
    )
    claim = sim.get("resourceclaims.resource.k8s.io", "default", "five")
    assert "allocation" not in (claim.get("status") or {})
    core.create_namespaced_pod("default", _pod("orphan", {"resourceClaimName": "nope"}))
    msg = sim.get("pods", "default", "orphan")["status"]["conditions"][0]["message"]
    assert msg.startswith(
        '0/3 nodes are available: resourceclaim.resource.k8s.io "nope" not found.'
    )


INVALID = [
    (
        {
            "name": "gpu",
            "exactly": {"deviceClassName": "gpu.nvidia.com"},
            "firstAvailable": [{"name": "a", "deviceClassName": "gpu.nvidia.com"}],
        },
        'spec.devices.requests[0]: Invalid value: "null": exactly one of `exactly` or '
        "`firstAvailable` is required, but multiple fields are set",
    ),
    (
        {"name": "gpu"},
        "spec.devices.requests[0]: Required value: exactly one of `exactly` or "
        "`firstAvailable` is required",
    ),
    (
        {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "allocationMode": "Some"}},
        'spec.devices.requests[0].exactly.allocationMode: Unsupported value: "Some": '
        'supported values: "All", "ExactCount"',
    ),
    (
        {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": -1}},
        "spec.devices.requests[0].exactly.count: Invalid value: -1: must be greater than zero",
    ),
    (
        {
            "name": "gpu",
            "exactly": {"deviceClassName": "gpu.nvidia.com", "allocationMode": "All", "count": 2},
        },
        "spec.devices.requests[0].exactly.count: Invalid value: 2: must not be specified when "
        "allocationMode is 'All'",
    ),
]


@pytest.mark.parametrize(("request_", "words"), INVALID)
def test_invalid_claims_refused_with_the_api_servers_words(
    resource: client.ResourceV1Api, sim: KubeSim, request_: dict[str, Any], words: str
) -> None:
    body = {"metadata": {"name": "bad"}, "spec": {"devices": {"requests": [request_]}}}
    with pytest.raises(ApiException) as exc:
        resource.create_namespaced_resource_claim("default", body)
    assert exc.value.status == 422
    status = json.loads(exc.value.body)
    assert status["reason"] == "Invalid"
    assert status["message"] == f'ResourceClaim.resource.k8s.io "bad" is invalid: {words}'
    assert sim.list("resourceclaims.resource.k8s.io", "default") == []


def test_selector_that_does_not_compile_is_refused_by_kubectl(
    kubectl: Kubectl, tmp_path: Path, sim: KubeSim
) -> None:
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "typo"},
        "spec": _claim_spec(
            "gpu.nvidia.com", selector="device.attributes['gpu.nvidia.com'].productName =="
        ),
    }
    path = tmp_path / "claim.yaml"
    path.write_text(yaml.safe_dump(claim))
    err = kubectl("apply", "-f", str(path), check=False).stderr
    # kubectl words the 422 as "The <Kind> "<name>" is invalid: <causes>".
    assert err.startswith(
        'The ResourceClaim "typo" is invalid: spec.devices.requests[0].exactly.selectors[0]'
        ".cel.expression: Invalid value: "
    )
    assert "compilation failed: ERROR: <input>:1:51: Syntax error: mismatched input '<EOF>'" in err
    assert "\n | ..................................................^" in err
    undeclared = dict(claim, metadata={"name": "undeclared"})
    undeclared["spec"] = _claim_spec("gpu.nvidia.com", selector="gpu.memory > 1")
    path.write_text(yaml.safe_dump(undeclared))
    err = kubectl("apply", "-f", str(path), check=False).stderr
    assert "compilation failed: ERROR: <input>:1:1: undeclared reference to 'gpu'" in err
    assert sim.list("resourceclaims.resource.k8s.io", "default") == []


def test_claim_defaults_status_subresource_patch_and_watch(
    resource: client.ResourceV1Api, kubectl: Kubectl, sim: KubeSim, tmp_path: Path
) -> None:
    made = resource.create_namespaced_resource_claim(
        "default",
        {
            "metadata": {"name": "c"},
            "spec": {
                "devices": {
                    "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]
                }
            },
        },
    )
    exact = made.spec.devices.requests[0].exactly
    assert (exact.allocation_mode, exact.count) == ("ExactCount", 1)
    # The status subresource: a driver's status.devices patch, the spec untouched.
    patched = resource.patch_namespaced_resource_claim_status(
        "c",
        "default",
        {"status": {"devices": [{"driver": "gpu.nvidia.com", "pool": "p", "device": "d"}]}},
    )
    assert patched.status.devices[0].device == "d"
    assert sim.get("resourceclaims.resource.k8s.io", "default", "c")["status"]["devices"]
    labelled = resource.patch_namespaced_resource_claim(
        "c", "default", {"metadata": {"labels": {"a": "b"}}}
    )
    assert labelled.metadata.labels == {"a": "b"} and labelled.status.devices
    with pytest.raises(ApiException) as exc:
        resource.patch_namespaced_resource_claim(
            "c",
            "default",
            {
                "spec": {
                    "devices": {
                        "requests": [
                            {"name": "other", "exactly": {"deviceClassName": "mig.nvidia.com"}}
                        ]
                    }
                }
            },
        )
    assert exc.value.status == 422 and "spec: Invalid value: " in exc.value.body
    assert "field is immutable" in exc.value.body
    kept = sim.get("resourceclaims.resource.k8s.io", "default", "c")
    assert kept["spec"]["devices"]["requests"][0]["name"] == "gpu"
    # Server-side apply of a DeviceClass, a watch on the collection, delete.
    cls = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "h100.example.com"},
        "spec": {
            "selectors": [
                {
                    "cel": {
                        "expression": "device.attributes['gpu.nvidia.com'].productName"
                        " == 'NVIDIA H100 80GB HBM3'"
                    }
                }
            ]
        },
    }
    path = tmp_path / "class.yaml"
    path.write_text(yaml.safe_dump(cls))
    assert "serverside-applied" in kubectl("apply", "--server-side", "-f", str(path)).stdout
    events = [
        (e["type"], e["object"].metadata.name)
        for e in __import__("kubernetes")
        .watch.Watch()
        .stream(resource.list_device_class, timeout_seconds=1)
    ]
    assert ("ADDED", "h100.example.com") in events
    kubectl("delete", "deviceclass", "h100.example.com")
    assert sim.store.get("deviceclasses.resource.k8s.io", "", "h100.example.com") is None
    resource.delete_namespaced_resource_claim("c", "default")
    assert sim.list("resourceclaims.resource.k8s.io", "default") == []


@pytest.mark.parametrize(
    "mig",
    [
        {"profile": "1g.10gb", "perGpu": 8},  # 8 compute slices: a GPU has 7
        [{"profile": "3g.40gb", "perGpu": 2}, {"profile": "1g.10gb", "perGpu": 1}],  # 9 memory
        {"profile": "10gb"},
    ],
)
def test_fleet_mig_layout_a_gpu_cannot_hold_is_refused(mig: Any) -> None:
    pool = dict(FLEET["pools"][0], mig=mig)
    with pytest.raises(ValueError, match="MIG layout"):
        KubeSim(fleet=dict(FLEET, pools=[pool]))


def test_fleet_mig_layout_list_places_partitions_as_nvidia_does() -> None:
    mig = [
        {"profile": "3g.40gb", "perGpu": 1},
        {"profile": "2g.20gb", "perGpu": 1},
        {"profile": "1g.10gb", "perGpu": 2},
    ]
    pool = dict(FLEET["pools"][0], mig=mig)
    with KubeSim(fleet=dict(FLEET, pools=[pool])) as sim:
        names = sorted(_slice_devices(sim, "dra-h100-0"))
    assert [n for n in names if n.startswith("gpu-0")] == [
        "gpu-0",
        "gpu-0-mig-1g10gb-0",
        "gpu-0-mig-1g10gb-1",
        "gpu-0-mig-2g20gb-2-3",
        "gpu-0-mig-3g40gb-4-7",
    ]


def test_a_real_ray_worker_process_gets_its_claims_devices_as_nvidia_visible_devices() -> None:
    """kubesim's real Ray workers (``--real-ray``) start with NVIDIA_VISIBLE_DEVICES as
    NVIDIA's DRA driver sets it in the container: the UUIDs its claims were allocated."""
    from kubesim.operators.realray import _claimed_devices

    visible = json.dumps({"ray-worker": "MIG-1", "sidecar": "void"})
    pod = {"metadata": {"annotations": {"kubesim.io/nvidia-visible-devices": visible}}}
    assert _claimed_devices(pod, "ray-worker") == {"NVIDIA_VISIBLE_DEVICES": "MIG-1"}
    assert _claimed_devices({"metadata": {}}, "ray-worker") == {}  # the device plugin's
