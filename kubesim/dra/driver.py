"""The simulated NVIDIA DRA driver (``gpu.nvidia.com``): what its kubelet plugin publishes.

Each GPU node gets one ResourceSlice (pool = node name) with a device per GPU (``gpu-<i>``)
carrying the attributes NVIDIA's driver publishes, and its Helm chart's DeviceClasses are
installed. A pool's ``mig`` knob adds MIG partitions as devices of their own; each GPU is a
counter set that its partitions and the whole GPU consume (partitionable devices), so a
partition in use makes the whole GPU unallocatable and the other way round.
"""

from __future__ import annotations

import math
import re
import uuid
from typing import Any

DRIVER = "gpu.nvidia.com"
DRIVER_VERSION = "580.82.07"
CUDA_DRIVER_VERSION = "13.0.0"
# Product facts by GPU Feature Discovery's product label: productName as NVML reports it,
# architecture, CUDA compute capability (semver, as the driver normalises it), SMs.
PRODUCTS: dict[str, tuple[str, str, str, int]] = {
    "NVIDIA-H100-80GB-HBM3": ("NVIDIA H100 80GB HBM3", "Hopper", "9.0.0", 132),
    "NVIDIA-H200": ("NVIDIA H200", "Hopper", "9.0.0", 132),
    "NVIDIA-A100-SXM4-80GB": ("NVIDIA A100-SXM4-80GB", "Ampere", "8.0.0", 108),
    "NVIDIA-A100-SXM4-40GB": ("NVIDIA A100-SXM4-40GB", "Ampere", "8.0.0", 108),
    "NVIDIA-L4": ("NVIDIA L4", "Ada Lovelace", "8.9.0", 58),
}
MEMORY_SLICES = 8  # MIG memory slices of a GPU (A100, H100, H200)
COMPUTE_SLICES = 7
_PROFILE = re.compile(r"^([1-7])g\.(\d+)gb$")


def device_classes() -> list[dict[str, Any]]:
    """The DeviceClasses the driver's Helm chart installs (``resources.gpus.enabled``)."""

    def cls(name: str, type_: str) -> dict[str, Any]:
        expr = f"device.driver == '{DRIVER}' && device.attributes['{DRIVER}'].type == '{type_}'"
        return {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": expr}}]},
        }

    gpu = cls("gpu.nvidia.com", "gpu")
    gpu["spec"]["extendedResourceName"] = "nvidia.com/gpu"
    return [gpu, cls("mig.nvidia.com", "mig")]


def mig_layout(pool: dict[str, Any]) -> list[tuple[str, int, int, int, int]]:
    """The pool's ``mig`` knob placed on a GPU: (profile, compute slices, GB, first memory
    slice, memory slices) per partition. Larger partitions are placed first, from the top
    slice down, where MIG allows them (no compute slice past the seventh, 4g and 7g only
    from slice 0); ValueError when a GPU cannot hold the layout."""
    spec = pool.get("mig")
    if not spec:
        return []
    entries = spec if isinstance(spec, list) else [spec]
    wanted: list[tuple[str, int, int, int]] = []
    gib = _gpu_gib(pool)
    for entry in entries:
        profile = str((entry or {}).get("profile") or "") if isinstance(entry, dict) else ""
        count = int(entry.get("perGpu", 1)) if isinstance(entry, dict) else 0
        m = _PROFILE.match(profile)
        if m is None or count < 1:
            raise ValueError(f"pool {pool.get('name')}: bad MIG layout entry {entry!r}")
        g, gb = int(m.group(1)), int(m.group(2))
        wanted += [(profile, g, gb, _memory_slices(gb, gib))] * count
    if sum(w[1] for w in wanted) > COMPUTE_SLICES:
        raise ValueError(f"pool {pool.get('name')}: MIG layout {entries!r} does not fit a GPU")
    free = set(range(MEMORY_SLICES))
    out = []
    for profile, g, gb, size in sorted(wanted, key=lambda w: (-w[3], -w[1])):
        starts = [s for s in range(MEMORY_SLICES - size, -1, -size) if s + g < 8]
        starts = [0] if g in (4, 7) else starts
        start = next((s for s in starts if set(range(s, s + size)) <= free), None)
        if start is None:
            raise ValueError(f"pool {pool.get('name')}: MIG layout {entries!r} does not fit a GPU")
        free -= set(range(start, start + size))
        out.append((profile, g, gb, start, size))
    return sorted(out, key=lambda p: p[3])


def _gpu_gib(pool: dict[str, Any]) -> int:
    mib = int(str((pool.get("labels") or {}).get("nvidia.com/gpu.memory", "81559")))
    return max(1, round(mib / 1024 / 10) * 10)


def _memory_slices(gb: int, gpu_gib: int) -> int:
    per_slice = gpu_gib / MEMORY_SLICES
    return 1 << max(0, math.ceil(math.log2(max(1.0, gb / per_slice) - 1e-9)))


def _uuid(kind: str, *parts: object) -> str:
    u = uuid.uuid5(uuid.NAMESPACE_URL, "kubesim-gpu:" + ":".join(map(str, parts)))
    return f"{kind}-{u}"


def gpu_count(node: dict[str, Any]) -> int:
    """GPUs the DRA driver manages on a node: GFD's ``nvidia.com/gpu.count`` label, unless
    the node advertises the ``nvidia.com/gpu`` extended resource — then NVIDIA's device
    plugin manages its GPUs and the DRA driver is not deployed there (one of the two per
    node, as NVIDIA's charts install them, so that no GPU is handed out twice)."""
    if "nvidia.com/gpu" in ((node.get("status") or {}).get("allocatable") or {}):
        return 0
    labels = node["metadata"].get("labels") or {}
    try:
        return int(str(labels.get("nvidia.com/gpu.count", 0)))
    except ValueError:
        return 0


def node_slice(node: dict[str, Any], pool: dict[str, Any] | None) -> dict[str, Any] | None:
    """The ResourceSlice the driver's kubelet plugin publishes for ``node`` (None: no GPU
    the driver manages, see :func:`gpu_count`)."""
    count = gpu_count(node)
    if count <= 0:
        return None
    name = node["metadata"]["name"]
    labels = node["metadata"].get("labels") or {}
    product = labels.get("nvidia.com/gpu.product", "NVIDIA-GPU")
    pname, arch, cc, sms = PRODUCTS.get(product, (product.replace("-", " "), "unknown", "0.0.0", 1))
    mem_mib = int(str(labels.get("nvidia.com/gpu.memory", "0")) or 0)
    layout = mig_layout(pool or {})
    gib = _gpu_gib(pool or {"labels": labels})
    devices: list[dict[str, Any]] = []
    counter_sets: list[dict[str, Any]] = []
    for i in range(count):
        gpu_uuid = _uuid("GPU", name, i)
        common = {
            "productName": {"string": pname},
            "brand": {"string": "Nvidia"},
            "architecture": {"string": arch},
            "cudaComputeCapability": {"version": cc},
            "driverVersion": {"version": DRIVER_VERSION},
            "cudaDriverVersion": {"version": CUDA_DRIVER_VERSION},
            "pcieBusID": {"string": f"0000:{0x18 + 0x10 * i:02x}:00.0"},
        }
        whole: dict[str, Any] = {
            "name": f"gpu-{i}",
            "attributes": {
                "type": {"string": "gpu"},
                "uuid": {"string": gpu_uuid},
                **common,
            },
            "capacity": {"memory": {"value": f"{mem_mib}Mi"}},
        }
        devices.append(whole)
        if not layout:
            continue
        cset = f"gpu-{i}-counter-set"
        counters = {"multiprocessors": {"value": str(sms)}, "memory": {"value": f"{mem_mib}Mi"}}
        counters.update({f"memory-slice-{s}": {"value": "1"} for s in range(MEMORY_SLICES)})
        counter_sets.append({"name": cset, "counters": counters})
        whole["consumesCounters"] = [{"counterSet": cset, "counters": dict(counters)}]
        for profile, g, gb, start, size in layout:
            end = start + size - 1
            part_sms = sms * g // COMPUTE_SLICES
            used = {
                "multiprocessors": {"value": str(part_sms)},
                "memory": {"value": f"{gb * mem_mib // gib}Mi"},
            }
            used.update({f"memory-slice-{s}": {"value": "1"} for s in range(start, end + 1)})
            place = f"{start}" if size == 1 else f"{start}-{end}"
            devices.append(
                {
                    "name": f"gpu-{i}-mig-{profile.replace('.', '')}-{place}",
                    "attributes": {
                        "type": {"string": "mig"},
                        "uuid": {"string": _uuid("MIG", name, i, profile, start)},
                        "parentUUID": {"string": gpu_uuid},
                        "profile": {"string": profile},
                        **common,
                    },
                    "capacity": {
                        "multiprocessors": {"value": str(part_sms)},
                        "memory": used["memory"],
                    },
                    "consumesCounters": [{"counterSet": cset, "counters": used}],
                }
            )
    spec: dict[str, Any] = {
        "driver": DRIVER,
        "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
        "nodeName": name,
        "devices": devices,
    }
    if counter_sets:
        spec["sharedCounters"] = counter_sets
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{name}-{DRIVER}-slice", "labels": {"kubesim.io/pool": name}},
        "spec": spec,
    }
