"""NVIDIA's DCGM exporter on each simulated GPU node: ``/metrics`` on port 9400, in the
Prometheus text format, reached through the API server's node proxy
(``/api/v1/nodes/{node}:9400/proxy/metrics``, as for an exporter listening on the node's
address).

One series per GPU for ``DCGM_FI_DEV_GPU_UTIL`` (percent) and ``DCGM_FI_DEV_FB_USED``
(MiB), labelled as the exporter labels them (``gpu``, ``UUID``, ``pci_bus_id``,
``device``, ``modelName``, ``Hostname``) and, for a GPU a running pod holds, with the
pod's ``namespace``, ``pod`` and ``container`` (the exporter's Kubernetes mapping). The
values follow the simulated load: a GPU of a Ray pod whose head runs a driver (a job or an
interactive ``ray.init``) is busy, 60-95 %, any other GPU is at 0 %; the simulator-only
annotation ``kubesim.io/gpu-utilization`` on the pod or its RayCluster forces a value.
kubesim/README.md (*GPU utilisation*).
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import TYPE_CHECKING, Any

from kubesim import errors
from kubesim.dra.controller import VISIBLE
from kubesim.dra.driver import PRODUCTS, _uuid
from kubesim.store import Obj
from kubesim.util import get_path

if TYPE_CHECKING:
    from kubesim.cluster import Cluster

PORT = 9400
NODE_PROXY = re.compile(r"^/api/v1/nodes/([^/]+)/proxy(/.*)?$")
TEXT = "text/plain; version=0.0.4; charset=utf-8"
ANN_UTIL = "kubesim.io/gpu-utilization"
RC = "rayclusters.ray.io"
_FAMILIES = (
    ("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %)."),
    ("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB)."),
)


def _int(value: Any) -> int:
    try:
        return int(str(value))
    except ValueError:
        return 0


def _gpu_limit(container: dict[str, Any]) -> int:
    resources = container.get("resources") or {}
    return _int((resources.get("limits") or {}).get("nvidia.com/gpu", 0))


def _holders(cluster: Cluster, node: str, uuids: list[str]) -> dict[str, tuple[Obj, str]]:
    """Which running pod's container holds each GPU of ``node``, by UUID: the DRA driver's
    hand-over names them; the device plugin's GPUs go to containers in name order."""
    held: dict[str, tuple[Obj, str]] = {}
    free = list(uuids)
    pods = sorted(
        (
            p
            for p in cluster.store.iter("pods")
            if get_path(p, "spec", "nodeName") == node
            and get_path(p, "status", "phase") == "Running"
        ),
        key=lambda p: (p["metadata"]["namespace"], p["metadata"]["name"]),
    )
    for pod in pods:
        visible = (pod["metadata"].get("annotations") or {}).get(VISIBLE)
        if visible:
            for container, ids in json.loads(visible).items():
                for u in str(ids).split(","):
                    if u in free:
                        free.remove(u)
                        held[u] = (pod, container)
            continue
        for c in get_path(pod, "spec", "containers", default=[]):
            for _ in range(_gpu_limit(c)):
                if free:
                    held[free.pop(0)] = (pod, c["name"])
    return held


def _forced(cluster: Cluster, pod: Obj) -> float | None:
    """The value the simulator-only annotation forces, on the pod or its RayCluster."""
    ray = (pod["metadata"].get("labels") or {}).get("ray.io/cluster", "")
    rc = cluster.store.get(RC, pod["metadata"]["namespace"], ray) if ray else None
    for obj in (pod, rc):
        value = get_path(obj or {}, "metadata", "annotations", ANN_UTIL)
        if value is not None:
            try:
                return min(max(float(value), 0.0), 100.0)
            except ValueError:
                return None
    return None


def _busy(cluster: Cluster, pod: Obj) -> bool:
    """A Ray pod whose head runs a driver now (a job, or an interactive one)."""
    ray = (pod["metadata"].get("labels") or {}).get("ray.io/cluster", "")
    if not ray:
        return False
    drivers, _ = cluster.rayruntime.activity(
        pod["metadata"]["namespace"], ray, cluster.clock.time()
    )
    return drivers > 0


def _busy_value(uuid: str, at: float) -> float:
    """60-95 %, steady within a minute and different from one minute to the next."""
    digest = hashlib.sha256(f"{uuid}:{int(at // 60)}".encode()).digest()
    return float(60 + digest[0] % 36)


def node_metrics(cluster: Cluster, node: Obj) -> str:
    """The exporter's ``/metrics`` answer for ``node`` (see the module docstring)."""
    name = node["metadata"]["name"]
    labels = node["metadata"].get("labels") or {}
    count = _int(labels.get("nvidia.com/gpu.count", 0)) or _int(
        get_path(node, "status", "allocatable", "nvidia.com/gpu", default=0)
    )
    product = labels.get("nvidia.com/gpu.product", "NVIDIA-GPU")
    model = PRODUCTS.get(product, (product.replace("-", " "),))[0]
    memory = _int(labels.get("nvidia.com/gpu.memory", 0))
    uuids = [_uuid("GPU", name, i) for i in range(count)]  # as the DRA driver publishes them
    held = _holders(cluster, name, uuids)
    now = cluster.clock.time()
    rows: list[tuple[str, float, float]] = []
    for i, uuid in enumerate(uuids):
        base = (
            f'gpu="{i}",UUID="{uuid}",pci_bus_id="00000000:{0x18 + 0x10 * i:02X}:00.0",'
            f'device="nvidia{i}",modelName="{model}",Hostname="{name}"'
        )
        util = 0.0
        if uuid in held:
            pod, container = held[uuid]
            meta = pod["metadata"]
            base += f',container="{container}",namespace="{meta["namespace"]}",pod="{meta["name"]}"'
            forced = _forced(cluster, pod)
            if forced is not None:
                util = forced
            elif _busy(cluster, pod):
                util = _busy_value(uuid, now)
        used = round(memory * (0.2 + 0.6 * util / 100)) if util else 0
        rows.append((base, util, float(used)))
    out = []
    for index, (family, help_text) in enumerate(_FAMILIES):
        out.append(f"# HELP {family} {help_text}\n# TYPE {family} gauge\n")
        for base, util_value, used_mib in rows:
            value = util_value if index == 0 else used_mib
            out.append(f"{family}{{{base}}} {int(value)}\n")
    return "".join(out)


def node_proxy(cluster: Cluster, method: str, path: str) -> tuple[int, Any]:
    """The answer to ``/api/v1/nodes/{node}[:port]/proxy/{path}``: the exporter's metrics
    on port 9400 of a GPU node; refusals as the API server words them."""
    found = NODE_PROXY.match(path)
    assert found is not None
    name, _, port = found.group(1).partition(":")
    node = cluster.store.get("nodes", "", name)
    if node is None:
        return 404, errors.not_found("nodes", "", name).status()
    ip = next(
        (
            a.get("address", "")
            for a in get_path(node, "status", "addresses", default=[])
            if a.get("type") == "InternalIP"
        ),
        "",
    )
    gpus = _int(get_path(node, "status", "allocatable", "nvidia.com/gpu", default=0)) or _int(
        (node["metadata"].get("labels") or {}).get("nvidia.com/gpu.count", 0)
    )
    if port != str(PORT) or not gpus:
        reason = f"dial tcp {ip}:{port or 10250}: connect: connection refused"
        return 503, errors.ApiError(
            503, "ServiceUnavailable", f"error trying to reach service: {reason}"
        ).status()
    if method != "GET" or (found.group(2) or "/") != "/metrics":
        return 404, b"404 page not found\n"
    return 200, node_metrics(cluster, node).encode()
