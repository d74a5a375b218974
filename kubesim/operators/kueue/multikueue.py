"""Kueue's MultiKueue, manager side (``pkg/controller/admissionchecks/multikueue``):
:class:`MultiKueue` connects to the worker clusters the MultiKueueClusters name (a
kubeconfig in a Secret of ``kueue-system``), keeps their ``Active`` condition and that of
the ``kueue.x-k8s.io/multikueue`` AdmissionChecks, and dispatches the Workloads that
reserved quota behind such a check (``mkworkloads.py``). It runs in its own thread (the
simulator's, see ``sim.py``): requests to workers are made without the cluster lock held.
Settings: Kueue's Configuration ``multiKueue`` stanza (``mkconfig.py``).
"""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Any

from kubesim.operators.kueue.common import condition
from kubesim.operators.kueue.mkconfig import (
    AC,
    CONTROLLER,
    KUEUE_NAMESPACE,
    MKC,
    SECRET_KEY,
    Settings,
    Worker,
    config_clusters,
)
from kubesim.operators.kueue.mkremote import (
    BadKubeConfig,
    WorkerClient,
    WorkerUnreachable,
    parse_kubeconfig,
)
from kubesim.operators.kueue.mkworkloads import Dispatcher
from kubesim.store import Obj
from kubesim.util import get_path

if TYPE_CHECKING:
    from kubesim.controller import ClusterView


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

    def __init__(self, cluster: ClusterView, settings: Settings) -> None:
        self.cluster = cluster
        self.settings = settings
        self.workers: dict[str, Worker] = {}
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


__all__ = ["MultiKueue"]
