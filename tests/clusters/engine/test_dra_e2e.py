"""DRA flavors through the real loop (worker, kubesim over HTTP with its simulated NVIDIA
DRA driver): a dev cluster on a MIG slice and a production cluster on whole GPUs claimed
by DRA become ready; each worker's claim is allocated, the worker sees only those
devices, the API detail says which they are, and deleting the request deletes its claim
templates and claims."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from clusters.kube import cdi
from clusters.kube.gateway import get_gateway
from clusters.models import ClusterRequest
from kubesim import KubeSim
from tenants.models import DeviceMode
from tests.clusters.engine.conftest import engine_worker, wait_for
from tests.clusters.kube.test_cdi import _fake_node, _run_script
from tests.factories import GpuFlavorFactory, QuotaFactory

CLUSTERS = "/api/v1/tenants/acme/clusters/"
RESOURCE = "resource.k8s.io/v1"
VISIBLE = "kubesim.io/nvidia-visible-devices"
GPU_TAINT = [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]
A100_SELECTOR = "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA A100-SXM4-80GB'"
# No nvidia.com/gpu in any allocatable: the DRA driver, not the device plugin, manages them.
FLEET: dict[str, Any] = {
    "name": "dra",
    "pools": [
        {
            "name": "h100mig",
            "count": 1,
            "labels": {
                "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                "nvidia.com/gpu.count": "2",
                "nvidia.com/gpu.memory": "81559",
            },
            "allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110"},
            "taints": GPU_TAINT,
            "mig": {"profile": "1g.10gb", "perGpu": 7},
        },
        {
            "name": "a100",
            "count": 2,
            "labels": {
                "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
                "nvidia.com/gpu.count": "4",
                "nvidia.com/gpu.memory": "81920",
            },
            "allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110"},
            "taints": GPU_TAINT,
        },
        {"name": "cpu", "count": 2, "allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"}},
    ],
}


@pytest.fixture
def dra_kubesim(tmp_path: Path, settings: Any) -> Iterator[KubeSim]:
    """kubesim over HTTP on :data:`FLEET`, the test's settings pointed at it."""
    sim = KubeSim(fleet=FLEET, port=0, startup_delay=0.0).start()
    settings.KUBECONFIG = sim.write_kubeconfig(str(tmp_path / "kubeconfig"))
    try:
        yield sim
    finally:
        sim.stop()


@pytest.fixture
def flavors(acme: Any) -> tuple[Any, Any]:
    """H100 1g.10gb slices (14 on the node) and whole A100s through DRA (4 per node)."""
    mig = GpuFlavorFactory(
        name="h100-1g",
        gpu_product="NVIDIA-H100-80GB-HBM3",
        gpus_per_node=14,
        cpu_per_node=64,
        memory_per_node_gib=512,
        node_count=1,
        device_mode=DeviceMode.MIG,
        mig_profile="1g.10gb",
    )
    whole = GpuFlavorFactory(
        name="a100-dra",
        gpu_product="NVIDIA-A100-SXM4-80GB",
        gpus_per_node=4,
        cpu_per_node=64,
        memory_per_node_gib=512,
        node_count=2,
        device_mode=DeviceMode.DRA,
        device_selector=A100_SELECTOR,
    )
    QuotaFactory(tenant=acme, flavor=mig, gpus=14, borrow_limit=0)
    QuotaFactory(tenant=acme, flavor=whole, gpus=8, borrow_limit=0)
    return mig, whole


def _row(name: str) -> ClusterRequest:
    return ClusterRequest.objects.unscoped().get(name=name)


def _claims(row: ClusterRequest) -> list[dict[str, Any]]:
    return get_gateway().list(
        RESOURCE,
        "ResourceClaim",
        namespace=row.namespace,
        label_selector=f"gangway.dev/cluster-id={row.pk}",
    )


def _templates(row: ClusterRequest) -> list[dict[str, Any]]:
    return get_gateway().list(
        RESOURCE,
        "ResourceClaimTemplate",
        namespace=row.namespace,
        label_selector=f"gangway.dev/cluster-id={row.pk}",
    )


def _workers(row: ClusterRequest) -> list[dict[str, Any]]:
    return get_gateway().list(
        "v1", "Pod", label_selector=f"gangway.dev/cluster-id={row.pk},ray.io/node-type=worker"
    )


def _slice_devices(node: str) -> dict[str, dict[str, Any]]:
    (sl,) = get_gateway().list(RESOURCE, "ResourceSlice", field_selector=f"spec.nodeName={node}")
    return {d["name"]: d for d in sl["spec"]["devices"]}


def _attr(device: dict[str, Any], name: str) -> str:
    return str(device["attributes"][name]["string"])


def test_a_mig_dev_cluster_and_a_dra_prod_cluster_end_to_end(
    transactional_db: Any,
    dra_kubesim: KubeSim,
    tmp_path: Path,
    settings: Any,
    as_user: Any,
    alice: Any,
    bob: Any,
    flavors: tuple[Any, Any],
) -> None:
    settings.CONTAINER_GPUS_SECCOMP_PROFILE = "profiles/gangway-podman.json"
    # The CDI spec describes whole GPUs: a MIG slice is refused it, with the reason.
    nested = {"name": "nested", "kind": "dev", "flavor": "h100-1g", "container_gpus": True}
    refused = as_user(bob).post(CLUSTERS, nested, format="json")
    assert refused.status_code == 400, refused.content
    assert "MIG partition (1g.10gb)" in str(refused.json()["error"]["fields"]["container_gpus"])
    with engine_worker(tmp_path):
        dev = {"name": "slice", "kind": "dev", "flavor": "h100-1g"}
        assert as_user(bob).post(CLUSTERS, dev, format="json").status_code == 201
        prod = {
            "name": "train",
            "kind": "prod",
            "flavor": "a100-dra",
            "workers": 1,
            "container_gpus": True,
        }
        assert as_user(alice).post(CLUSTERS, prod, format="json").status_code == 201
        wait_for(
            lambda: _row("slice").state == "ready", what="the MIG dev cluster ready", timeout=90
        )
        wait_for(
            lambda: _row("train").state == "ready", what="the DRA prod cluster ready", timeout=90
        )

        # The dev worker: one claim, allocated one 1g.10gb slice; it sees only that slice.
        row = _row("slice")
        (claim,) = _claims(row)
        (result,) = claim["status"]["allocation"]["devices"]["results"]
        (worker,) = _workers(row)
        node = worker["spec"]["nodeName"]
        device = _slice_devices(node)[result["device"]]
        assert _attr(device, "type") == "mig" and _attr(device, "profile") == "1g.10gb"
        mig_uuid = _attr(device, "uuid")
        assert mig_uuid.startswith("MIG-")
        visible = json.loads(worker["metadata"]["annotations"][VISIBLE])
        assert visible["ray-worker"] == mig_uuid
        limits = worker["spec"]["containers"][0]["resources"]["limits"]
        assert "nvidia.com/gpu" not in limits

        # The API detail says which device it got.
        detail = as_user(bob).get(CLUSTERS + "slice/").json()
        (shown,) = detail["devices"]
        assert shown["pod"] == worker["metadata"]["name"] and shown["node"] == node
        assert (shown["device"], shown["mig_profile"], shown["uuid"]) == (
            result["device"],
            "1g.10gb",
            mig_uuid,
        )
        browser = Client()
        browser.force_login(bob)
        page = browser.get("/t/acme/clusters/slice/").content.decode()
        assert "GPU devices" in page and mig_uuid in page

        # The prod worker: every GPU of one A100 node.
        row = _row("train")
        (claim,) = _claims(row)
        results = claim["status"]["allocation"]["devices"]["results"]
        (worker,) = _workers(row)
        node = worker["spec"]["nodeName"]
        gpus = {n: d for n, d in _slice_devices(node).items() if _attr(d, "type") == "gpu"}
        assert sorted(r["device"] for r in results) == sorted(gpus)
        visible = json.loads(worker["metadata"]["annotations"][VISIBLE])
        assert sorted(visible["ray-worker"].split(",")) == sorted(
            _attr(d, "uuid") for d in gpus.values()
        )
        # The CDI init container shares the claim: it is handed the same devices, and
        # writes a spec of exactly those (the script, on a node with these GPUs and more).
        assert visible["gpu-cdi-spec"] == visible["ray-worker"]
        on_node = {_attr(d, "uuid"): str(i) for i, d in enumerate(gpus.values())}
        _fake_node(tmp_path / "node", {**on_node, "GPU-not-this-pods": "7"})
        done = _run_script(tmp_path / "node", visible["gpu-cdi-spec"])
        assert done.returncode == 0, done.stderr
        spec = json.loads((tmp_path / "node/out" / cdi.CDI_SPEC_FILE).read_text())
        (every,) = [d for d in spec["devices"] if d["name"] == "all"]
        assert sorted(n["path"] for n in every["containerEdits"]["deviceNodes"]) == [
            f"/dev/nvidia{i}" for i in range(4)
        ]
        assert worker["metadata"]["labels"]  # a managed pod
        assert len(as_user(alice).get(CLUSTERS + "train/").json()["devices"]) == 4

        # Deleting the requests deletes their templates, and their claims with the pods.
        for name, user in (("slice", bob), ("train", alice)):
            row = _row(name)
            assert _templates(row)
            assert as_user(user).delete(CLUSTERS + f"{name}/").status_code == 202
            wait_for(
                lambda r=row: _row(r.name).state == "deleted", what=f"{name} deleted", timeout=60
            )
            wait_for(
                lambda r=row: not _templates(r) and not _claims(r), what="templates and claims gone"
            )
