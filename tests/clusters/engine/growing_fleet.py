"""A simulated fleet whose H100 node group can grow, and a catalogue that says so: the
setting of the capacity-on-demand tests (built-in queue and Kueue mode)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from clusters.kube.gateway import get_gateway
from clusters.models import ClusterRequest
from kubesim import KubeSim
from tenants.models import Quota

ROOT = Path(__file__).resolve().parents[3]
H100_PRODUCT = "NVIDIA-H100-80GB-HBM3"


def growing_fleet() -> dict[str, Any]:
    """kubesim's growing fleet with one H100 node that may grow to two (nodes boot in 1 s)."""
    fleet = yaml.safe_load((ROOT / "kubesim/fleets/autoscaling.yaml").read_text())
    fleet["autoscaler"]["scaleUpDelay"] = 1
    for pool in fleet["pools"]:
        if pool["name"] == "h100":
            pool["count"], pool["maxCount"] = 1, 2
    return fleet


def make_h100_growable(h100: Any, acme: Any) -> Any:
    """The catalogue's H100 as the fleet has it (1 node, up to 2), and room in acme's
    quota (24 GPUs) for what the nodes cannot hold yet."""
    h100.node_count, h100.max_node_count = 1, 2
    h100.save()
    Quota.objects.filter(tenant=acme, flavor=h100).update(gpus=24, borrow_limit=0)
    return h100


def named_row(name: str) -> ClusterRequest:
    """The request row ``name``, of whichever tenant."""
    return ClusterRequest.objects.unscoped().get(name=name)


def h100_nodes() -> int:
    """H100 nodes the cluster has now."""
    return sum(
        1
        for n in get_gateway().list("v1", "Node")
        if n["metadata"]["labels"].get("nvidia.com/gpu.product") == H100_PRODUCT
    )


@contextmanager
def growing_kubesim(tmp_path: Path, settings: Any, *, kueue: bool = False) -> Iterator[KubeSim]:
    """kubesim over HTTP serving :func:`growing_fleet` (with Kueue's emulation and
    ``QUEUE_MODE=kueue`` when ``kueue``), the test's settings pointed at it."""
    if kueue:
        settings.QUEUE_MODE = "kueue"
    sim = KubeSim(fleet=growing_fleet(), port=0, startup_delay=0.0, kueue=kueue).start()
    sim.write_kubeconfig(str(tmp_path / "kubeconfig"))
    settings.KUBECONFIG = str(tmp_path / "kubeconfig")
    try:
        yield sim
    finally:
        sim.stop()
