"""What the simulated scheduler knows of nodes and pods: a node's free room and GPU
shares, a pending pod's requirements, where a bound pod sits, and whether a pod's node
selector and required node affinity match a node.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from kubesim import podaffinity
from kubesim.store import Obj
from kubesim.util import get_path

PodKey = tuple[str, str]


@dataclass
class NodeInfo:
    """What the scheduler tracks per node: allocatable, used, labels, taints, GPU shares."""

    name: str
    labels: dict[str, str]
    taints: list[dict[str, Any]]
    unschedulable: bool
    alloc: dict[str, int]
    used: Counter[str] = field(default_factory=Counter)
    pods: int = 0
    shares: list[float] = field(default_factory=list)  # used fraction of each shared GPU
    gpu_memory: int = 0


@dataclass
class Placement:
    """Where a bound pod sits and what it takes."""

    node: str
    amounts: dict[str, int]
    share: tuple[int, float] | None = None  # (shared GPU index, fraction) for KAI pods
    labels: dict[str, str] = field(default_factory=dict)  # what other pods' affinity matches


@dataclass
class PodReq:
    """A pending pod's scheduling requirements."""

    key: PodKey
    seq: int
    sig: str
    amounts: dict[str, int]
    fraction: float = 0.0
    gpu_memory: int = 0  # MiB asked with the KAI gpu-memory annotation
    claims: bool = False  # has spec.resourceClaims: DRA allocates its devices (kubesim/dra)
    affinity: podaffinity.PodAffinity | None = None  # inter-pod (anti-)affinity terms
    labels: dict[str, str] = field(default_factory=dict)

    def fraction_on(self, info: NodeInfo) -> float:
        """The GPU fraction this pod takes on a node (gpu-memory depends on the GPU)."""
        if self.fraction or not self.gpu_memory:
            return self.fraction
        return min(1.0, self.gpu_memory / info.gpu_memory) if info.gpu_memory else 1.0


def expr_matches(expr: dict[str, Any], labels: dict[str, str]) -> bool:
    """Whether ``labels`` satisfy one node selector requirement (In, NotIn, Exists, ...)."""
    key, op, values = expr.get("key", ""), expr.get("operator", ""), expr.get("values") or []
    if op == "In":
        return labels.get(key) in values
    if op == "NotIn":
        return labels.get(key) not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    if op in ("Gt", "Lt") and key in labels and values:
        try:
            a, b = int(labels[key]), int(values[0])
        except ValueError:
            return False
        return a > b if op == "Gt" else a < b
    return False


def node_affinity_matches(pod_spec: dict[str, Any], node: NodeInfo) -> bool:
    """Whether ``node`` meets the pod's nodeSelector and required node affinity terms."""
    for k, v in (pod_spec.get("nodeSelector") or {}).items():
        if node.labels.get(k) != v:
            return False
    terms = get_path(
        pod_spec,
        "affinity",
        "nodeAffinity",
        "requiredDuringSchedulingIgnoredDuringExecution",
        "nodeSelectorTerms",
    )
    if not terms:
        return True
    fields = {"metadata.name": node.name}
    for term in terms:
        exprs = term.get("matchExpressions") or []
        fexprs = term.get("matchFields") or []
        if not exprs and not fexprs:
            continue
        if all(expr_matches(e, node.labels) for e in exprs) and all(
            expr_matches(e, fields) for e in fexprs
        ):
            return True
    return False


def fraction_of(pod: Obj, node_gpu_memory: int = 0) -> float:
    """GPU fraction a KAI pod asks for (``gpu-fraction``, or ``gpu-memory`` in MiB)."""
    ann = pod["metadata"].get("annotations") or {}
    if ann.get("gpu-fraction"):
        try:
            return float(ann["gpu-fraction"])
        except ValueError:
            return 0.0
    if ann.get("gpu-memory") and node_gpu_memory:
        return min(1.0, float(ann["gpu-memory"]) / node_gpu_memory)
    return 0.0
