"""A simulated fleet with H100s both ways — a DRA-managed pool in MIG 1g.10gb x 7 and a
device-plugin pool with the same product label — and a CPU pool; the catalogue's three
H100 flavors on it (whole GPUs as an extended resource, whole GPUs through DRA, MIG
slices), and pods that claim its devices."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from clusters.kube.gateway import get_gateway
from kubesim import KubeSim
from tenants.models import DeviceMode, GpuFlavor
from tests.clusters.engine.conftest import running_kubesim

H100_PRODUCT = "NVIDIA-H100-80GB-HBM3"
MIG_PROFILE = 'device.attributes["gpu.nvidia.com"].profile == "1g.10gb"'
TAINT = {"key": "nvidia.com/gpu", "effect": "NoSchedule"}
TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
FLEET: dict[str, Any] = {
    "name": "dra",
    "pools": [
        {
            "name": "mig",
            "count": 2,
            "labels": {
                "nvidia.com/gpu.product": H100_PRODUCT,
                "nvidia.com/gpu.count": "8",
                "nvidia.com/gpu.memory": "81559",
            },
            # No nvidia.com/gpu: NVIDIA's DRA driver, not its device plugin, has these GPUs.
            "allocatable": {"cpu": "192", "memory": "1800Gi", "pods": "110"},
            "taints": [TAINT],
            "mig": {"profile": "1g.10gb", "perGpu": 7},
        },
        {
            "name": "h100",
            "count": 2,
            "labels": {"nvidia.com/gpu.product": H100_PRODUCT, "nvidia.com/gpu.count": "8"},
            "allocatable": {
                "cpu": "192",
                "memory": "1800Gi",
                "pods": "110",
                "nvidia.com/gpu": "8",
            },
            "taints": [TAINT],
        },
        {"name": "cpu", "count": 1, "allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"}},
    ],
}


def dra_flavors() -> tuple[GpuFlavor, GpuFlavor, GpuFlavor]:
    """The fleet's H100 flavors: ``h100`` (extended resource), ``h100-dra`` (whole GPUs
    through gpu.nvidia.com) and ``h100-1g`` (1g.10gb partitions, 56 per node)."""
    common = {"gpu_product": H100_PRODUCT, "cpu_per_node": 192, "memory_per_node_gib": 1800}
    h100, _ = GpuFlavor.objects.update_or_create(
        name="h100", defaults={**common, "gpus_per_node": 8, "node_count": 2}
    )
    whole = GpuFlavor.objects.create(
        name="h100-dra", gpus_per_node=8, node_count=2, device_mode=DeviceMode.DRA, **common
    )
    slices = GpuFlavor.objects.create(
        name="h100-1g",
        gpus_per_node=56,
        node_count=2,
        device_mode=DeviceMode.MIG,
        mig_profile="1g.10gb",
        **common,
    )
    return h100, whole, slices


@contextmanager
def dra_kubesim(tmp_path: Path, settings: Any) -> Iterator[KubeSim]:
    """kubesim over HTTP serving :data:`FLEET`, the test's settings pointed at it."""
    with running_kubesim(tmp_path, settings, fleet=FLEET) as sim:
        yield sim


def claim_devices(
    name: str, node: str, *, device_class: str, count: int, selector: str = ""
) -> dict[str, Any]:
    """Create (through the gateway) a pod on ``node`` whose claim of its own (same name)
    asks for ``count`` devices of ``device_class``; returns the pod."""
    gw = get_gateway()
    exactly: dict[str, Any] = {"deviceClassName": device_class, "count": count}
    if selector:
        exactly["selectors"] = [{"cel": {"expression": selector}}]
    gw.create(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"devices": {"requests": [{"name": "gpus", "exactly": exactly}]}},
        }
    )
    claim = [{"name": "gpus", "resourceClaimName": name}]
    return _pod_on(name, node, {"claims": [{"name": "gpus"}]}, resourceClaims=claim)


def extended_pod(name: str, node: str, gpus: int) -> dict[str, Any]:
    """Create a pod on ``node`` that takes ``gpus`` of the device plugin's nvidia.com/gpu."""
    return _pod_on(name, node, {"limits": {"nvidia.com/gpu": str(gpus)}})


def _pod_on(name: str, node: str, resources: dict[str, Any], **spec: Any) -> dict[str, Any]:
    """Create a one-container pod pinned to ``node`` (tolerating GPU taints)."""
    container = {"name": "main", "image": "busybox", "resources": resources}
    return get_gateway().create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {
                "nodeSelector": {"kubernetes.io/hostname": node},
                "tolerations": [TOLERATION],
                "containers": [container],
                **spec,
            },
        }
    )
