"""Kueue's MultiKueue, manager side (``pkg/controller/admissionchecks/multikueue``):
:class:`MultiKueue` connects to the worker clusters the MultiKueueClusters name (a
kubeconfig in a Secret of ``kueue-system``), keeps their ``Active`` condition and that of
the ``kueue.x-k8s.io/multikueue`` AdmissionChecks, and dispatches the Workloads that
reserved quota behind such a check (``mkworkloads.py``). It runs in its own thread (the
simulator's, see ``sim.py``): requests to workers are made without the cluster lock held.
Settings: Kueue's Configuration ``multiKueue`` stanza (:func:`parse_settings`).
"""

from __future__ import annotations

import base64
import logging
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kubesim.operators.kueue.common import CQ, LQ, QUEUE_LABEL, condition
from kubesim.operators.kueue.mkremote import (
    BadKubeConfig,
    WorkerClient,
    WorkerUnreachable,
    parse_kubeconfig,
)
from kubesim.store import Obj
from kubesim.util import get_path

if TYPE_CHECKING:
    from kubesim.cluster import Cluster
    from kubesim.controller import ClusterView

log = logging.getLogger(__name__)

CONTROLLER = "kueue.x-k8s.io/multikueue"
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
    """Kueue's defaulting webhook (``ApplyDefaultForManagedBy``): a new queued RayJob or
    RayCluster without ``spec.managedBy`` whose LocalQueue's ClusterQueue has a MultiKueue
    check is managed by MultiKueue (the manager's KubeRay leaves it alone)."""
    spec = job.setdefault("spec", {})
    if spec.get("managedBy"):
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


def _set_condition(cluster: ClusterView, key: str, obj: Obj, cond: dict[str, Any]) -> None:
    """Write ``cond`` as ``obj``'s only condition of its type when its state changed."""
    old = get_path(obj, "status", "conditions", default=[]) or []
    prev = next((c for c in old if c.get("type") == cond["type"]), None)
    if prev is not None and all(prev.get(k) == cond[k] for k in ("status", "reason", "message")):
        return
    others = [c for c in old if c.get("type") != cond["type"]]
    obj.setdefault("status", {})["conditions"] = [*others, cond]
    cluster.update_object(cluster.rt(key), obj)


class MultiKueue:
    """The MultiKueue controllers of a manager cluster (see the module docstring)."""

    def __init__(self, cluster: Cluster, settings: Settings) -> None:
        self.cluster = cluster
        self.settings = settings
        self.workers: dict[str, Worker] = {}
        # Imported here: the workload part needs this module's names.
        from kubesim.operators.kueue.mkworkloads import Dispatcher

        self.dispatcher = Dispatcher(self)

    def now(self) -> float:
        """The manager's clock."""
        return self.cluster.clock.time()

    def sync(self) -> None:
        """One pass: connect to the workers, write the clusters' and checks' status, then
        dispatch and follow the Workloads."""
        with self.cluster.lock:
            if not self.cluster.kueue_enabled:
                return
            mkcs = {
                o["metadata"]["name"]: self._kubeconfig(o) for o in self.cluster.store.iter(MKC)
            }
            uses = any(
                get_path(ac, "spec", "controllerName") == CONTROLLER
                for ac in self.cluster.store.iter(AC)
            )
        if not mkcs and not uses and not self.workers:
            return
        verdicts = {name: self._connect(name, source) for name, source in mkcs.items()}
        for gone in set(self.workers) - set(mkcs):
            del self.workers[gone]
        with self.cluster.lock:
            for name, (active, reason, message) in verdicts.items():
                obj = self.cluster.store.get(MKC, "", name)
                if obj is not None:
                    cond = condition("Active", active, reason, message, [])
                    _set_condition(self.cluster, MKC, obj, _keep_time(obj, cond))
            self._sync_checks()
            self.cluster.settle()
        self.dispatcher.sync()

    # -- clusters --------------------------------------------------------------------

    def _kubeconfig(self, mkc: Obj) -> tuple[str, str] | tuple[None, tuple[str, str]]:
        """(kubeconfig text, "") from the Secret the cluster names, or (None, (reason,
        message)) as Kueue's ``loadClientConfig`` fails. Read under the lock."""
        source = get_path(mkc, "spec", "clusterSource") or {}
        ref = source.get("kubeConfig")
        if source.get("clusterProfileRef") and not ref:
            return None, (
                "MultiKueueClusterProfileFeatureDisabled",
                "load client config failed: MultiKueueClusterProfile feature gate is disabled",
            )
        if not ref:
            return None, ("BadKubeConfig", "load client config failed: kubeconfig reference is nil")
        location = str(ref.get("location", ""))
        if ref.get("locationType") != "Secret":
            return None, (
                "BadKubeConfig",
                f"load client config failed: open {location}: no such file or directory",
            )
        secret = self.cluster.store.get("secrets", KUEUE_NAMESPACE, location)
        if secret is None:
            return None, (
                "BadKubeConfig",
                f'load client config failed: secrets "{location}" not found',
            )
        data = (secret.get("data") or {}).get(SECRET_KEY)
        if data is not None:
            try:
                return base64.b64decode(data).decode(), ""
            except ValueError:
                pass
        text = (secret.get("stringData") or {}).get(SECRET_KEY)
        if text is None:
            return None, (
                "BadKubeConfig",
                f'load client config failed: key "{SECRET_KEY}" not found in secret "{location}"',
            )
        return str(text), ""

    def _connect(self, name: str, source: Any) -> tuple[bool, str, str]:
        """Connect to worker ``name`` (no lock held): (active, reason, message) for its
        ``Active`` condition; the worker's state follows."""
        worker = self.workers.setdefault(name, Worker())
        text, problem = source
        try:
            if text is None:
                raise BadKubeConfig(*problem)
            server, token = parse_kubeconfig(text)
            if worker.client is None or (worker.client.server, worker.client.token) != (
                server,
                token,
            ):
                worker.client = WorkerClient(server, token)
            worker.client.probe()
        except BadKubeConfig as exc:
            self.mark_lost(name)
            worker.client = None
            message = str(exc)
            if not message.startswith("load client config failed"):
                message = f"load client config failed: {message}"
            return False, exc.reason, message
        except (WorkerUnreachable, RuntimeError) as exc:
            self.mark_lost(name)
            return False, "ClientConnectionFailed", str(exc)
        worker.connected = True
        worker.lost_since = None
        return True, "Active", "Connected"

    def mark_lost(self, name: str) -> None:
        """Worker ``name`` stopped answering: the worker-lost timer starts (once)."""
        worker = self.workers.setdefault(name, Worker())
        if worker.lost_since is None:
            worker.lost_since = self.now()
        worker.connected = False

    def connected(self, name: str) -> WorkerClient | None:
        """The client of worker ``name`` when it is connected."""
        worker = self.workers.get(name)
        return worker.client if worker is not None and worker.connected else None

    # -- admission checks --------------------------------------------------------------

    def _sync_checks(self) -> None:
        """``Active`` on each MultiKueue AdmissionCheck as Kueue's AC reconciler writes it."""
        store = self.cluster.store
        for ac in list(store.iter(AC)):
            if get_path(ac, "spec", "controllerName") != CONTROLLER:
                continue
            names, error = config_clusters(self.cluster, ac)
            active, reason, message = True, "Active", "The admission check is active"
            if names is None:
                active, reason = False, "BadConfig"
                message = f"Cannot load the AdmissionChecks parameters: {error}"
            else:
                missing = [n for n in names if store.get(MKC, "", n) is None]
                inactive = [
                    n
                    for n in names
                    if n not in missing
                    and not any(
                        c.get("type") == "Active" and c.get("status") == "True"
                        for c in get_path(store.get(MKC, "", n), "status", "conditions", default=[])
                        or []
                    )
                ]
                if missing or inactive:
                    usable = len(missing) + len(inactive) < len(names)
                    active, reason = usable, "SomeActiveClusters" if usable else "NoUsableClusters"
                    parts = [f"Missing clusters: [{' '.join(missing)}]"] if missing else []
                    if inactive:
                        parts.append(f"Inactive clusters: [{' '.join(inactive)}]")
                    message = ", ".join(parts)
            cond = _keep_time(ac, condition("Active", active, reason, message, []))
            _set_condition(self.cluster, AC, ac, cond)


def _keep_time(obj: Obj, cond: dict[str, Any]) -> dict[str, Any]:
    """``cond`` with the old condition's transition time when its status is unchanged."""
    old = get_path(obj, "status", "conditions", default=[]) or []
    return condition(cond["type"], cond["status"] == "True", cond["reason"], cond["message"], old)


__all__ = [
    "ALL_AT_ONCE",
    "CONTROLLER",
    "INCREMENTAL",
    "KUEUE_NAMESPACE",
    "MultiKueue",
    "Settings",
    "default_managed_by",
    "parse_duration",
    "parse_settings",
]
