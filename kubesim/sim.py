"""``KubeSim``: the in-process simulator (HTTP server thread + ticker thread), its admin
API, kubeconfig writing, restart and snapshots."""

from __future__ import annotations

import json
import logging
import os
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Self

import yaml

from kubesim import errors
from kubesim.clock import Clock
from kubesim.cluster import DEFAULT_EVENT_TTL, Cluster
from kubesim.faults import Faults
from kubesim.operators.kueue.mkconfig import parse_settings
from kubesim.operators.kueue.multikueue import MultiKueue
from kubesim.operators.raydashboard import Dashboard
from kubesim.operators.rayruntime import ANN_DRIVER, DRIVER_STATES, RC
from kubesim.server import Server
from kubesim.serviceproxy import ProxyLog
from kubesim.store import DEFAULT_WATCH_HISTORY, Obj, Store
from kubesim.util import get_path
from kubesim.watch import DEFAULT_BOOKMARK_INTERVAL

log = logging.getLogger(__name__)
# How often MultiKueue's controllers look at the workers (Kueue watches them).
MULTIKUEUE_PERIOD = 0.1


class KubeSim:
    """A simulated GPU Kubernetes cluster served over HTTP on loopback.

    ``fleet`` is a fleet YAML path, a dict, or None for the demo fleet. ``startup_delay`` is
    how long bound pods take to become Running (0: immediately, as tests want). ``kueue`` and
    ``kai`` turn on the Kueue and KAI emulations. ``snapshot_path``: state is loaded from it
    at start when it exists and saved to it on stop and periodically. ``event_ttl``: seconds
    an event lives after its last write (kube-apiserver's ``--event-ttl``, 1 h by default).
    ``clock``: where expiry reads the time (a :class:`kubesim.clock.ManualClock` in tests).
    ``procs_root``: the folder real processes behind pods run in (``localproc.py``); None:
    no process runs, every pod is simulated. ``real_ray``: how many RayClusters run real
    Ray (``operators/realray.py``; needs ``procs_root``); None: the fleet's ``realRay``.
    Simulated Ray drivers (RayJobs) take their defaults from the fleet's ``rayjobs:`` and
    :meth:`set_rayjob_defaults`.
    ``scale_up_delay``, ``scale_down_unneeded_time``, ``booking_time`` (seconds): the
    cluster autoscaler's timings (see ``autoscaler.py``); None takes the fleet's
    ``autoscaler`` keys, else the defaults (30 s, 600 s, 600 s).
    ``multikueue``: Kueue's Configuration ``multiKueue`` stanza (``workerLostTimeout``,
    ``gcInterval``, ``origin``, ``dispatcherName``; durations as ``"15m"`` or seconds) for
    a Kueue-enabled simulator acting as a MultiKueue manager (``operators/kueue/multikueue.py``).
    ``kueue_feature_gates``: Kueue's feature gates over its v0.19 defaults, as Kueue's
    ``--feature-gates`` (``"ElasticJobsViaWorkloadSlices=false"``) or a dict.
    ``kueue_config``: Kueue's Configuration (``config.kueue.x-k8s.io/v1beta2``) as a dict, of
    which ``resources.deviceClassMappings`` is read (DRA devices in quota,
    ``operators/kueue/devices.py``); an invalid one is a ValueError, as Kueue would not start.
    """

    def __init__(
        self,
        fleet: str | dict[str, Any] | None = None,
        port: int = 0,
        startup_delay: float = 0.0,
        kueue: bool = False,
        kai: bool = False,
        snapshot_path: str | None = None,
        host: str = "127.0.0.1",
        snapshot_interval: float = 10.0,
        event_ttl: float = DEFAULT_EVENT_TTL,
        clock: Clock | None = None,
        scale_up_delay: float | None = None,
        scale_down_unneeded_time: float | None = None,
        booking_time: float | None = None,
        watch_history: int = DEFAULT_WATCH_HISTORY,
        watch_bookmark_interval: float = DEFAULT_BOOKMARK_INTERVAL,
        kueue_feature_gates: str | dict[str, bool] | None = None,
        kueue_config: dict[str, Any] | None = None,
        multikueue: dict[str, Any] | None = None,
        procs_root: str | None = None,
        real_ray: int | None = None,
    ) -> None:
        if watch_bookmark_interval <= 0:
            raise ValueError("watch_bookmark_interval must be positive (seconds)")
        self.host = host
        self.port = port
        self.snapshot_path = snapshot_path
        self.snapshot_interval = snapshot_interval
        self.cluster = Cluster(
            fleet=fleet,
            startup_delay=startup_delay,
            kueue=kueue,
            kai=kai,
            event_ttl=event_ttl,
            clock=clock,
            scale_up_delay=scale_up_delay,
            scale_down_unneeded_time=scale_down_unneeded_time,
            booking_time=booking_time,
            watch_history=watch_history,
            kueue_feature_gates=kueue_feature_gates,
            kueue_config=kueue_config,
            procs_root=Path(procs_root) if procs_root else None,
            real_ray=real_ray,
        )
        self.watch_bookmark_interval = float(watch_bookmark_interval)
        # MultiKueue's manager controllers: their own thread (they wait on other clusters).
        self.multikueue = MultiKueue(self.cluster, parse_settings(multikueue))
        # Open watch streams (each holds a server thread): tests check that a client
        # leaving frees its thread.
        self._watches = 0
        self._watches_lock = threading.Lock()
        self.watch_breaks = 0  # break_watches() calls: an open stream cut when it changes
        self.faults = Faults()
        # The last requests received on service proxy paths (``GET /_kubesim/proxy-requests``).
        self.proxy_log = ProxyLog()
        self._server: Server | None = None
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()
        self._saved_rv = -1
        if snapshot_path and os.path.exists(snapshot_path):
            self.load_snapshot(snapshot_path)

    # -- lifecycle -----------------------------------------------------------------------

    @property
    def url(self) -> str:
        """Base URL, e.g. ``http://127.0.0.1:40123``."""
        return f"http://{self.host}:{self.port}"

    @property
    def stopping(self) -> threading.Event:
        """Set while the simulator stops (ends ``follow`` log streams)."""
        return self._stop

    @property
    def active_watches(self) -> int:
        """How many watch streams are open now."""
        with self._watches_lock:
            return self._watches

    def break_watches(self) -> int:
        """Cut every open watch stream now, without its end, as a load balancer in front of
        the API server that drops its connections does (clients must list and watch
        again); the number of streams cut."""
        with self._watches_lock:
            self.watch_breaks += 1
            return self._watches

    @contextmanager
    def watch_opened(self) -> Iterator[None]:
        """Count one open watch stream for as long as the block runs."""
        with self._watches_lock:
            self._watches += 1
        try:
            yield
        finally:
            with self._watches_lock:
                self._watches -= 1

    @property
    def store(self) -> Store:
        """The object store (read it under ``sim.cluster.lock`` if the server is busy)."""
        return self.cluster.store

    def start(self) -> Self:
        """Serve in background threads; returns self."""
        self._server = Server((self.host, self.port), self)
        self.port = self._server.server_address[1]
        self._stop.clear()
        serve = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"kubesim-http-{self.port}",
            daemon=True,
        )
        ticker = threading.Thread(
            target=self._tick_loop, name=f"kubesim-tick-{self.port}", daemon=True
        )
        self._threads = [serve, ticker]
        if self.cluster.kueue_enabled:
            self._threads.append(
                threading.Thread(
                    target=self._multikueue_loop,
                    name=f"kubesim-multikueue-{self.port}",
                    daemon=True,
                )
            )
        for t in self._threads:
            t.start()
        if self.cluster.localprocs.enabled:
            # Pods still Running from before a restart get their processes again.
            with self.cluster.lock:
                self.cluster.localprocs.reset()
                self.cluster.settle()
        return self

    def stop(self) -> None:
        """Stop serving (and save the snapshot when one is configured)."""
        self._stop.set()
        self.cluster.store.wake_watchers()  # open watches end now, not at their next poll
        if self._server is not None:
            self._server.closed = True
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        for t in self._threads:
            t.join(timeout=5)
        self._threads = []
        self.cluster.localprocs.close()
        if self.cluster.realray is not None:
            self.cluster.realray.close()
        if self.snapshot_path:
            self.save_snapshot(self.snapshot_path)

    def restart(self, keep_state: bool = True) -> Self:
        """Stop and start again on the same port; without ``keep_state`` every object but
        the nodes (rebuilt from the fleet) is forgotten."""
        self.stop()
        if not keep_state:
            self.cluster.wipe()
        for _ in range(50):
            try:
                return self.start()
            except OSError:
                time.sleep(0.1)  # the old socket may linger for a moment
        return self.start()

    def __enter__(self) -> Self:
        """Start on entering a ``with`` block."""
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _multikueue_loop(self) -> None:
        while not self._stop.wait(MULTIKUEUE_PERIOD):
            try:
                self.multikueue.sync()
            except Exception:
                log.exception("MultiKueue pass failed")

    def _tick_loop(self) -> None:
        last_save = time.monotonic()
        while not self._stop.wait(0.05):
            self.cluster.tick()
            if self.snapshot_path and time.monotonic() - last_save > self.snapshot_interval:
                last_save = time.monotonic()
                self.save_snapshot(self.snapshot_path, only_if_changed=True)

    # -- faults ------------------------------------------------------------------------

    def set_faults(
        self,
        rate: float = 0.2,
        codes: Any = (500, 503, 429, 409),
        delay_ms: int = 0,
        retry_after: int = 1,
        methods: Any = None,
        seed: int | None = None,
        max_page: int = 0,
        slow_ms: int = 0,
        verb_rates: dict[str, float] | None = None,
        rotate: bool = False,
        floor: int = 0,
        spare: Any = (),
    ) -> None:
        """Answer a fraction ``rate`` of API requests with one of ``codes`` after
        ``delay_ms``; ``methods`` limits injection to some HTTP methods (None: all);
        ``max_page`` caps the items of a list page; ``slow_ms`` is how late the ``SLOW``
        code serves a request; ``verb_rates``, ``rotate``, ``floor`` and ``spare``: see
        :mod:`kubesim.faults`."""
        self.faults.set(
            rate=rate,
            codes=codes,
            delay_ms=delay_ms,
            retry_after=retry_after,
            methods=methods,
            seed=seed,
            max_page=max_page,
            slow_ms=slow_ms,
            verb_rates=verb_rates,
            rotate=rotate,
            floor=floor,
            spare=spare,
        )

    def clear_faults(self) -> None:
        """Stop injecting faults."""
        self.faults.clear()

    # -- simulated Ray drivers ----------------------------------------------------------

    def set_rayjob_defaults(
        self,
        run_seconds: float | None = None,
        outcome: str | None = None,
        message: str | None = None,
        pending_seconds: float | None = None,
        checkpoint: str | None = None,
    ) -> None:
        """How simulated Ray drivers behave when their RayJob's ``kubesim.io/job-*``
        annotations do not say: PENDING for ``pending_seconds`` after submission, RUNNING
        for ``run_seconds``, then ``outcome`` (``succeeded`` or ``failed``) with
        ``message``; ``checkpoint="on-notice"``: they checkpoint on a preemption notice,
        ``"every-<n>s"``: each ``n`` seconds of work (``operators/raycheckpoint.py``;
        ``""``: they do not). None keeps a value. Read when a job is submitted."""
        with self.cluster.lock:
            self.cluster.rayjob_defaults.update(
                run_seconds=run_seconds,
                outcome=outcome,
                message=message,
                pending_seconds=pending_seconds,
                checkpoint=checkpoint,
            )

    # -- the Ray dashboard behind the service proxy ---------------------------------------

    # -- pod failures (kubesim/podfaults.py) ---------------------------------------------

    def set_missing_images(self, patterns: list[str]) -> None:
        """Images (``fnmatch`` patterns) the simulated registry lacks, besides every
        image on a ``*.invalid`` host: pulling one fails (``ErrImagePull``)."""
        self.cluster.kubelet.faults.set_missing_images(patterns)

    def set_container_fault(
        self, namespace: str, selector: str, fault: str | None, container: str = ""
    ) -> None:
        """Containers of pods matching ``selector`` (``a=b,c=d``) in ``namespace`` crash
        (``crash``) or are OOM-killed (``oom``) from their next start; None stops it."""
        self.cluster.kubelet.faults.set_container_fault(namespace, selector, fault, container)

    def set_node_ready(self, name: str, ready: bool) -> None:
        """Make a node's kubelet report NotReady (``ready`` False) or Ready again."""
        with self.cluster.lock:
            self.cluster.kubelet.set_node_ready(name, ready)
            self.cluster.settle()

    def _admin_pods(self, method: str, path: str, body: Any) -> dict[str, Any] | None:
        """The pod-failure knobs over HTTP (``None``: not one of their paths)."""
        b = body or {}
        try:
            if path == "/_kubesim/registry/missing" and method == "POST":
                self.set_missing_images([str(p) for p in b.get("images") or []])
                return {"missing": list(self.cluster.kubelet.faults.missing)}
            if path == "/_kubesim/container-faults" and method == "POST":
                fault = b.get("fault")
                self.set_container_fault(
                    str(b.get("namespace", "")),
                    str(b.get("selector", "")),
                    str(fault) if fault else None,
                    str(b.get("container", "")),
                )
                return {"status": "set"}
            prefix, suffix = "/_kubesim/nodes/", "/ready"
            if path.startswith(prefix) and path.endswith(suffix) and method == "POST":
                name = path[len(prefix) : -len(suffix)]
                self.set_node_ready(name, bool(b.get("ready", True)))
                return {"node": name, "ready": bool(b.get("ready", True))}
        except ValueError as exc:
            raise errors.bad_request(str(exc)) from exc
        except KeyError as exc:
            raise errors.ApiError(404, "NotFound", f"no node {exc.args[0]}") from exc
        return None

    def ray_jobs(self, namespace: str, cluster: str) -> list[dict[str, Any]]:
        """The jobs the dashboard of RayCluster ``namespace/cluster`` lists (``GET
        /api/jobs/``: Ray's JobDetails); empty without a head."""
        with self.cluster.lock:
            rc = self.cluster.store.get(RC, namespace, cluster)
            name = get_path(rc, "status", "head", "podName")
            pod = self.cluster.store.get("pods", namespace, name) if name else None
            if pod is None:
                return []
            return Dashboard(self.cluster, rc, pod).jobs()

    def set_ray_driver(self, namespace: str, cluster: str, state: str) -> None:
        """Connect (``active``) or disconnect (``idle``) an interactive ``ray.init``
        driver on RayCluster ``namespace/cluster``: sets its ``kubesim.io/ray-driver``
        annotation (simulator-only) as a client would patch it."""
        if state not in DRIVER_STATES:
            raise ValueError(f"state must be one of {DRIVER_STATES}, not {state!r}")
        with self.cluster.lock:
            rc = self.cluster.store.get(RC, namespace, cluster)
            if rc is None:
                raise errors.not_found("rayclusters", "ray.io", cluster)
            rc = json.loads(json.dumps(rc))
            rc["metadata"].setdefault("annotations", {})[ANN_DRIVER] = state
            self.cluster.update_object(self.cluster.rt(RC), rc)
            self.cluster.settle()

    def proxy_requests(self) -> list[dict[str, Any]]:
        """The last requests received on service proxy paths, oldest first."""
        return self.proxy_log.items()

    # -- kubeconfig --------------------------------------------------------------------

    def kubeconfig(self, context: str = "kubesim") -> dict[str, Any]:
        """A kubeconfig for this server (plain HTTP): a user and a context per known token
        (``kubesim``, the admin; ``gangway``, its service account; the fleet's users),
        ``context`` the current one."""
        names = [name for name, _ in self.cluster.tokens.values()]
        if context not in names:
            raise ValueError(f"no user {context!r}: one of {names}")
        users, contexts = [], []
        for token, (name, _) in self.cluster.tokens.items():
            users.append({"name": name, "user": {"token": token}})
            ctx = {"cluster": "kubesim", "user": name, "namespace": "default"}
            contexts.append({"name": name, "context": ctx})
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": context,
            "clusters": [{"name": "kubesim", "cluster": {"server": self.url}}],
            "users": users,
            "contexts": contexts,
            "preferences": {},
        }

    def write_kubeconfig(self, path: str, context: str = "kubesim") -> str:
        """Write the kubeconfig (current ``context``) to ``path`` and return the path."""
        parent = os.path.dirname(os.path.abspath(path))
        os.makedirs(parent, exist_ok=True)
        with open(path, "w", encoding="utf-8") as fh:
            yaml.safe_dump(self.kubeconfig(context), fh, sort_keys=False)
        return path

    # -- direct reads for tests ----------------------------------------------------------

    def get(self, key: str, namespace: str, name: str) -> Obj | None:
        """A copy of one object by storage key (``pods``, ``rayclusters.ray.io``)."""
        with self.cluster.lock:
            obj = self.cluster.store.get(key, namespace, name)
            return json.loads(json.dumps(obj)) if obj is not None else None

    def list(self, key: str, namespace: str | None = None) -> list[Obj]:
        """Copies of the objects of one resource."""
        with self.cluster.lock:
            return json.loads(
                json.dumps(
                    sorted(
                        self.cluster.store.iter(key, namespace),
                        key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]),
                    )
                )
            )

    # -- snapshots -----------------------------------------------------------------------

    def save_snapshot(self, path: str, only_if_changed: bool = False) -> None:
        """Write the store as JSON atomically (temporary file, then rename)."""
        with self.cluster.lock:
            if only_if_changed and self.cluster.store.rv == self._saved_rv:
                return
            data = self.cluster.store.dump()
            data["counters"] = {"ip": self.cluster.ip_counter, "svc": self.cluster.svc_counter}
            text = json.dumps(data)
            self._saved_rv = self.cluster.store.rv
        parent = os.path.dirname(os.path.abspath(path))
        os.makedirs(parent, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=parent, prefix=".kubesim-snapshot-")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)

    def load_snapshot(self, path: str) -> None:
        """Replace the state with a snapshot's and rebuild the controllers' bookkeeping."""
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
        self.cluster.restore(data)

    def _admin_kueue_evict(self, b: dict[str, Any]) -> dict[str, Any]:
        """``POST /_kubesim/kueue/evict``: evict a job's Workload as Kueue does."""
        if not self.cluster.kueue_enabled:
            raise errors.bad_request("kubesim runs without --kueue")
        with self.cluster.lock:
            wl = self.cluster.kueue.evict(
                str(b.get("namespace", "")),
                str(b.get("name", "")),
                str(b.get("reason", "Preempted")),
                b.get("message"),
            )
            self.cluster.settle()
            return {"status": "evicted", "workload": wl["metadata"]["name"]}

    def _admin_pod_exit(self, body: dict[str, Any]) -> dict[str, Any]:
        """``POST /_kubesim/pods/exit``: the containers of running pod ``namespace/name``
        exit with ``exitCode`` (0 by default), as if their process ended (containers do not
        run in kubesim)."""
        ns, name = str(body.get("namespace", "")), str(body.get("name", ""))
        try:
            code = int(body.get("exitCode", 0))
        except (TypeError, ValueError):
            raise errors.bad_request("exitCode must be an integer") from None
        with self.cluster.lock:
            pod = self.cluster.store.get("pods", ns, name)
            if pod is None:
                raise errors.ApiError(404, "NotFound", f'pods "{name}" not found')
            if get_path(pod, "status", "phase") != "Running":
                raise errors.bad_request(f"pod {ns}/{name} is not Running")
            self.cluster.kubelet.terminate(pod, code)
            self.cluster.settle()
            return {"status": "exited", "phase": pod["status"]["phase"]}

    def _admin_proxy_requests(self, method: str) -> dict[str, Any]:
        """``GET`` (the recorded proxy requests) or ``DELETE`` (forget them)."""
        if method == "DELETE":
            self.proxy_log.clear()
            return {"status": "cleared"}
        return {"items": self.proxy_log.items()}

    # -- admin API -----------------------------------------------------------------------

    def _admin_set_faults(self, b: dict[str, Any]) -> dict[str, Any]:
        """``POST /_kubesim/faults``: :meth:`set_faults` from a JSON body."""
        self.set_faults(
            rate=float(b.get("rate", 0.2)),
            codes=b.get("codes", (500, 503, 429, 409)),
            delay_ms=int(b.get("delay_ms", 0)),
            retry_after=int(b.get("retry_after", 1)),
            methods=b.get("methods"),
            seed=b.get("seed"),
            max_page=int(b.get("max_page", 0)),
            slow_ms=int(b.get("slow_ms", 0)),
            verb_rates=b.get("verb_rates"),
            rotate=bool(b.get("rotate", False)),
            floor=int(b.get("floor", 0)),
            spare=b.get("spare") or (),
        )
        return self.faults.stats()["config"]

    def admin(self, method: str, path: str, body: Any) -> dict[str, Any]:
        """``/_kubesim/...``: faults, reset, stats, snapshot, Kueue evictions (never
        faulted)."""
        if path == "/_kubesim/faults" and method == "POST":
            return self._admin_set_faults(body or {})
        if path == "/_kubesim/faults" and method == "DELETE":
            self.clear_faults()
            return {"status": "cleared"}
        if path == "/_kubesim/faults" and method == "GET":
            return self.faults.stats()["config"]
        if path == "/_kubesim/reset" and method == "POST":
            self.cluster.wipe()
            return {"status": "reset"}
        if path == "/_kubesim/stats" and method == "GET":
            stats = self.faults.stats()
            with self.cluster.lock:
                stats["objects"] = {
                    k: self.cluster.store.count(k) for k in sorted(self.cluster.store.data)
                }
                stats["resourceVersion"] = self.cluster.store.rv
            stats["watches"] = self.active_watches
            return stats
        if path == "/_kubesim/stats" and method == "DELETE":
            self.faults.reset_stats()
            return {"status": "cleared"}
        actions = {
            "/_kubesim/kueue/evict": self._admin_kueue_evict,
            "/_kubesim/pods/exit": self._admin_pod_exit,
        }
        if method == "POST" and path in actions:
            return actions[path](body if isinstance(body, dict) else {})
        if path == "/_kubesim/proxy-requests" and method in ("GET", "DELETE"):
            return self._admin_proxy_requests(method)
        if path == "/_kubesim/snapshot" and method == "POST":
            if not self.snapshot_path:
                raise errors.bad_request("kubesim runs without --snapshot")
            self.save_snapshot(self.snapshot_path)
            return {"status": "saved", "path": self.snapshot_path}
        knobs = self._admin_pods(method, path, body)
        if knobs is not None:
            return knobs
        raise errors.ApiError(404, "NotFound", f"no admin endpoint {method} {path}")
