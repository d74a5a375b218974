"""Free GPU capacity per product from nodes and bound pods (pure)."""

from __future__ import annotations

from typing import Any

from clusters.queue.free_capacity import Free, free_by_product


def _node(name: str, product: str | None, gpus: int, *, ready: bool = True) -> dict[str, Any]:
    labels = {"nvidia.com/gpu.product": product} if product else {}
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {},
        "status": {
            "allocatable": {"nvidia.com/gpu": str(gpus)},
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def _pod(node: str | None, gpus: int, phase: str = "Running", **annotations: str) -> dict[str, Any]:
    resources = {"requests": {"nvidia.com/gpu": str(gpus)}} if gpus else {}
    return {
        "metadata": {"annotations": annotations},
        "spec": {"nodeName": node, "containers": [{"resources": resources}]},
        "status": {"phase": phase},
    }


def test_free_gpus_and_whole_free_nodes_per_product() -> None:
    nodes = [
        _node("h0", "H100", 8),
        _node("h1", "H100", 8),
        _node("h2", "H100", 8, ready=False),
        _node("l0", "L4", 1),
        _node("cpu", None, 0),
    ]
    pods = [
        _pod("h0", 3),
        _pod("h0", 1),
        _pod(None, 8),  # pending: takes nothing yet
        _pod("h1", 8, phase="Succeeded"),  # finished: frees its GPUs
        _pod("l0", 0, **{"gpu-fraction": "0.5"}),  # a shared GPU is taken whole
        _pod("cpu", 0),
    ]
    assert free_by_product(nodes, pods) == {
        "H100": Free(gpus=12, nodes=1, seen=2),
        "L4": Free(0, 0, seen=1),
    }
