"""MultiKueue's names and settings (Kueue's Configuration ``multiKueue`` stanza), the
config an AdmissionCheck names, the connection state of a worker, and Kueue's webhook
default of ``spec.managedBy``: what the MultiKueue controllers (``multikueue.py``,
``mkworkloads.py``) share.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from kubesim.operators.kueue.common import CQ, LQ, QUEUE_LABEL
from kubesim.operators.kueue.mkremote import WorkerClient
from kubesim.store import Obj
from kubesim.util import get_path

if TYPE_CHECKING:
    from kubesim.controller import ClusterView

CONTROLLER = "kueue.x-k8s.io/multikueue"
# KubeRay's own managedBy value, which Kueue's webhook may replace (CanDefaultManagedBy).
KUBERAY = "ray.io/kuberay-operator"
AC = "admissionchecks.kueue.x-k8s.io"
MKC = "multikueueclusters.kueue.x-k8s.io"
MKCONF = "multikueueconfigs.kueue.x-k8s.io"
# Kueue's namespace, where the kubeconfig Secrets live, and the Secret's key.
KUEUE_NAMESPACE = "kueue-system"
SECRET_KEY = "kubeconfig"
ALL_AT_ONCE = "kueue.x-k8s.io/multikueue-dispatcher-all-at-once"
INCREMENTAL = "kueue.x-k8s.io/multikueue-dispatcher-incremental"
# Kueue's Configuration defaults for ``multiKueue`` (durations in seconds).
DEFAULTS: dict[str, Any] = {
    "gcInterval": 60.0,
    "origin": "multikueue",
    "workerLostTimeout": 900.0,
    "dispatcherName": ALL_AT_ONCE,
}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def parse_duration(value: Any) -> float:
    """Seconds of a Go duration (``15m``, ``1m30s``, ``500ms``) or of a number."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    text = str(value).strip()
    parts = _DURATION.findall(text)
    if not text or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"invalid duration {value!r}: want e.g. 15m, 30s, 500ms")
    return sum(float(n) * _UNITS[u] for n, u in parts)


@dataclass(frozen=True)
class Settings:
    """Kueue's ``multiKueue`` configuration, parsed."""

    gc_interval: float
    origin: str
    worker_lost_timeout: float
    dispatcher: str


def parse_settings(raw: dict[str, Any] | None) -> Settings:
    """Kueue's Configuration ``multiKueue`` stanza over its defaults; an unknown key,
    a bad duration or an unknown dispatcher is a ValueError."""
    merged = dict(DEFAULTS)
    for key, value in (raw or {}).items():
        if key not in DEFAULTS:
            raise ValueError(f"unknown multiKueue setting {key!r} (known: {', '.join(DEFAULTS)})")
        merged[key] = value
    if merged["dispatcherName"] not in (ALL_AT_ONCE, INCREMENTAL):
        raise ValueError(f"dispatcherName must be {ALL_AT_ONCE} or {INCREMENTAL}")
    return Settings(
        gc_interval=parse_duration(merged["gcInterval"]),
        origin=str(merged["origin"]),
        worker_lost_timeout=parse_duration(merged["workerLostTimeout"]),
        dispatcher=str(merged["dispatcherName"]),
    )


@dataclass
class Worker:
    """The manager's connection to one MultiKueueCluster."""

    client: WorkerClient | None = None
    connected: bool = False
    # When the connection was first lost (the workerLostTimeout counts from it).
    lost_since: float | None = None


def config_clusters(cluster: ClusterView, ac: Obj) -> tuple[list[str] | None, str]:
    """The cluster names of the MultiKueueConfig an AdmissionCheck's parameters name, or
    None and why not (Kueue's ``ConfigFromRef`` error)."""
    ref = get_path(ac, "spec", "parameters") or {}
    if ref.get("apiGroup") != "kueue.x-k8s.io" or ref.get("kind") != "MultiKueueConfig":
        return None, "unsupported parameters reference"
    name = ref.get("name", "")
    conf = cluster.store.get(MKCONF, "", name)
    if conf is None:
        return None, f'multikueueconfigs.kueue.x-k8s.io "{name}" not found'
    return [str(c) for c in get_path(conf, "spec", "clusters", default=[]) or []], ""


def default_managed_by(cluster: ClusterView, job: Obj) -> None:
    """Kueue's defaulting webhook (``ApplyDefaultForManagedBy``): a new queued RayJob,
    RayCluster or RayService whose ``spec.managedBy`` is unset or KubeRay's, and whose
    LocalQueue's ClusterQueue has a MultiKueue check, is managed by MultiKueue (the
    manager's KubeRay leaves it alone)."""
    spec = job.setdefault("spec", {})
    if spec.get("managedBy") not in (None, "", KUBERAY):
        return
    meta = job.get("metadata") or {}
    lq = cluster.store.get(
        LQ, meta.get("namespace", ""), (meta.get("labels") or {}).get(QUEUE_LABEL, "")
    )
    cq = cluster.store.get(CQ, "", get_path(lq or {}, "spec", "clusterQueue", default="") or "")
    if cq is None:
        return
    names = [str(n) for n in get_path(cq, "spec", "admissionChecks", default=[]) or []]
    names += [
        str(r.get("name"))
        for r in get_path(cq, "spec", "admissionChecksStrategy", "admissionChecks", default=[])
        or []
    ]
    for name in names:
        ac = cluster.store.get(AC, "", name)
        if ac is not None and get_path(ac, "spec", "controllerName") == CONTROLLER:
            spec["managedBy"] = CONTROLLER
            return


class Connections(Protocol):
    """What the Workload reconciler needs of the cluster controller (``multikueue.py``)."""

    cluster: ClusterView
    settings: Settings
    workers: dict[str, Worker]

    def now(self) -> float:
        """The manager's clock."""

    def connected(self, name: str) -> WorkerClient | None:
        """The client of worker ``name`` when it is connected."""

    def mark_lost(self, name: str) -> None:
        """Worker ``name`` stopped answering."""
