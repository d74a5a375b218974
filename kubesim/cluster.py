"""The simulated cluster: its state, the write pipeline and the controller loop.

``Cluster`` is the facade the rest of kubesim uses, always with ``lock`` held: lifecycle
(bootstrap from a fleet, wipe, restore from a snapshot), the internal writes every API
verb (``verbs.py``) and every controller goes through (metadata bookkeeping: uid,
resourceVersion, generation, timestamps; defaulting, ``defaults.py``; admission:
validation, LimitRange defaults, ResourceQuota; the store), deletion (``deletion.py``),
events, and :meth:`Cluster.settle`: after a write the controllers (Kueue, KubeRay,
scheduler, kubelet, quota status) run until nothing is left to do, so that a caller sees
a settled cluster as soon as its write returns.
"""

from __future__ import annotations

import heapq
import threading
import time
from pathlib import Path
from typing import Any

from kubesim import errors, notebooks, podsecurity, rbac, sshd
from kubesim.admission import Quota
from kubesim.autoscaler import Autoscaler
from kubesim.clock import Clock
from kubesim.controller import Controller, Timed
from kubesim.defaults import default_namespace, default_pod, default_service
from kubesim.deletion import Deletion
from kubesim.dra.controller import Dra
from kubesim.errors import ApiError
from kubesim.fleet import build_nodes, load_fleet, node_conditions
from kubesim.kubelet import Kubelet
from kubesim.localproc import LocalProcesses
from kubesim.operators.batchjob import JobController, default_job
from kubesim.operators.kuberay import KubeRay
from kubesim.operators.kueue import Kueue
from kubesim.operators.kueue.mkconfig import KUEUE_NAMESPACE
from kubesim.operators.rayautoscaler import RayAutoscaler
from kubesim.operators.rayjob import RayJobController
from kubesim.operators.rayjob_defaults import RayJobDefaults
from kubesim.operators.rayruntime import RayRuntime
from kubesim.operators.rayserve import RayServe
from kubesim.operators.rayservice import RayServiceController
from kubesim.operators.realray import RealRay
from kubesim.resources import Registry, ResourceType
from kubesim.scheduler import Scheduler
from kubesim.store import DEFAULT_WATCH_HISTORY, Obj, Store
from kubesim.util import ip_from_index, new_uid, now, now_micro, parse_time, random_hex, suffix
from kubesim.validation import Validator, validate_metadata

CRD_KEY = "customresourcedefinitions.apiextensions.k8s.io"
SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
# kube-apiserver's --event-ttl default: events live an hour after their last write.
DEFAULT_EVENT_TTL = 3600.0
# kube-scheduler's podMaxInUnschedulablePodsDuration: waiting pods are retried this often.
UNSCHEDULABLE_FLUSH_SECONDS = 300.0


class Cluster:
    """State, write pipeline and controllers of one simulated cluster."""

    def __init__(
        self,
        fleet: str | dict[str, Any] | None = None,
        startup_delay: float = 0.0,
        kueue: bool = False,
        kai: bool = False,
        event_ttl: float = DEFAULT_EVENT_TTL,
        kueue_feature_gates: str | dict[str, bool] | None = None,
        kueue_config: dict[str, Any] | None = None,
        clock: Clock | None = None,
        scale_up_delay: float | None = None,
        scale_down_unneeded_time: float | None = None,
        booking_time: float | None = None,
        watch_history: int = DEFAULT_WATCH_HISTORY,
        procs_root: Path | None = None,
        real_ray: int | None = None,
    ) -> None:
        if event_ttl <= 0:
            raise ValueError("event_ttl must be positive (seconds)")
        self.lock = threading.RLock()
        self.clock = clock or Clock()
        self.event_ttl = float(event_ttl)
        # Event expiry, as etcd leases do it for kube-apiserver: each write of an event
        # (create, or a repeat bumping its count) sets its deadline to now + TTL. The heap
        # orders deadlines; an entry superseded by a later write is skipped when popped.
        self._event_deadline: dict[tuple[str, str], float] = {}
        self._event_heap: list[tuple[float, str, str]] = []
        self._next_flush = self.clock.time() + UNSCHEDULABLE_FLUSH_SECONDS
        self.registry = Registry.shared()
        self.validator = Validator()
        # The store's watches wait on a condition of this same lock (see Store).
        self.store = Store(self.lock, watch_history)
        self.fleet = load_fleet(fleet)
        # Bearer token -> (kubeconfig user, identity): the defaults and the fleet's users.
        self.tokens = rbac.token_table(self.fleet)
        # API groups whose operator this cluster has not installed (simulator knob
        # ``absentGroups``): their CRDs are not served, their paths are 404.
        self.absent_groups = frozenset(str(g) for g in self.fleet.get("absentGroups") or ())
        self.startup_delay = startup_delay
        self.kai_enabled = kai
        self.kueue_enabled = kueue
        self.kueue_feature_gates = kueue_feature_gates
        # Kueue's Configuration (config.kueue.x-k8s.io/v1beta2): its deviceClassMappings.
        self.kueue_config = kueue_config
        self.ip_counter = 0
        self.svc_counter = 0
        self.events_index: dict[tuple[str, str, str], tuple[str, str]] = {}
        self.warnings: list[str] = []
        self.quota = Quota(self)
        self.kubelet: Kubelet = Kubelet(self)
        self.scheduler: Scheduler = Scheduler(self)
        self.dra: Dra = Dra(self)  # before the scheduler: a pod's claims exist when it runs
        self.kuberay: KubeRay = KubeRay(self)
        self.kueue: Kueue = Kueue(self)
        self.rayjob: RayJobController = RayJobController(self)
        self.jobs: JobController = JobController(self)
        # The simulated driver's defaults: the fleet file's ``rayjobs:``, then the setter.
        self.rayjob_defaults = RayJobDefaults.from_fleet(self.fleet)
        self.rayruntime: RayRuntime = RayRuntime(self, self.rayjob_defaults)
        # The Ray autoscaler sidecars of RayClusters with in-tree autoscaling.
        self.rayautoscaler: RayAutoscaler = RayAutoscaler(self)
        # Ray Serve on the heads, and KubeRay's RayService controller.
        self.rayserve: RayServe = RayServe(self)
        self.rayservice: RayServiceController = RayServiceController(self)
        # The cluster autoscaler (node groups, ProvisioningRequests); None: the fleet's
        # ``autoscaler`` timings or the defaults.
        self.autoscaler: Autoscaler = Autoscaler(
            self, scale_up_delay, scale_down_unneeded_time, booking_time
        )
        # The kubelet follows the scheduler: pods bound in a pass start in the same pass.
        # The autoscaler looks after both, at the capacity the pass left.
        self.controllers: list[Controller] = []
        for controller in (
            self.kueue,
            self.kuberay,
            self.rayjob,
            self.jobs,
            self.dra,
            self.scheduler,
            self.kubelet,
            self.rayruntime,
            self.rayautoscaler,
            self.autoscaler,
            self.quota,
            self.rayserve,
            self.rayservice,
        ):
            self.register(controller)
        # Real processes behind pods (``localproc.py``): registered last, so a pod is
        # launched once every controller has written what it makes of the pass.
        self.localprocs: LocalProcesses = LocalProcesses(self, procs_root)
        self.register(self.localprocs)
        # Real Ray heads for the first N RayClusters (the fleet's ``realRay``, else 0).
        heads = int(self.fleet.get("realRay") or 0) if real_ray is None else real_ray
        self.realray: RealRay | None = None
        if procs_root is not None and heads > 0:
            self.realray = RealRay(self, heads)
            self.localprocs.add_launcher(self.realray.launch)
        # After Ray's: a notebook's kernels join the head that pass started (RAY_ADDRESS).
        self.localprocs.add_launcher(notebooks.launch)
        self.localprocs.add_launcher(sshd.launcher)
        # The controllers with timers, woken in this order by :meth:`tick`.
        self.timed: list[Timed] = [
            self.kubelet,
            self.rayjob,
            self.jobs,
            self.rayruntime,
            self.rayautoscaler,
            self.rayserve,
            self.rayservice,
        ]
        self.deletion = Deletion(self)
        self.bootstrap()

    # -- bootstrap ---------------------------------------------------------------------

    def register(self, controller: Controller) -> None:
        """Run ``controller`` in this cluster: reset with the store, told of every write
        and reconciled by :meth:`settle`, after those registered before it."""
        self.controllers.append(controller)

    def rt(self, key: str) -> ResourceType:
        """Resource type by storage key."""
        return self.registry.by_key(key)

    def bootstrap(self) -> None:
        """Create system namespaces, nodes from the fleet and the CRD objects."""
        with self.lock:
            # Kueue is installed in its namespace (MultiKueue's kubeconfig Secrets live there).
            extra = (KUEUE_NAMESPACE,) if self.kueue_enabled else ()
            for ns in SYSTEM_NAMESPACES + extra:
                if self.store.get("namespaces", "", ns) is None:
                    self.create_object(
                        self.rt("namespaces"),
                        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
                    )
            self.rebuild_nodes()
            self.install_crds()
            rbac.install_policy(self)
            self.settle()

    def install_crds(self) -> None:
        """Serve the CRD objects (read-only) under apiextensions.k8s.io."""
        crd_rt = self.rt(CRD_KEY)
        for rt in self.registry.types:
            if (
                rt.crd is not None
                and rt.group not in self.absent_groups
                and self.store.get(CRD_KEY, "", rt.crd["metadata"]["name"]) is None
            ):
                # The spec is shared with the registry and never written: no deep copy.
                obj = {
                    **rt.crd,
                    "metadata": dict(rt.crd["metadata"]),
                    "status": {
                        "acceptedNames": rt.crd["spec"]["names"],
                        "storedVersions": [rt.storage_version],
                        "conditions": [
                            {
                                "type": "Established",
                                "status": "True",
                                "reason": "InitialNamesAccepted",
                            }
                        ],
                    },
                }
                self.create_object(crd_rt, obj, admit=False)

    def rebuild_nodes(self) -> None:
        """Replace every Node with the fleet's."""
        rt = self.rt("nodes")
        for node in list(self.store.iter("nodes")):
            self.remove_object(rt, node)
        stamp = now()
        for node in build_nodes(self.fleet):
            node["status"]["conditions"] = node_conditions(stamp)
            self.create_object(rt, node, admit=False)

    def wipe(self) -> None:
        """Forget every object but nodes (rebuilt from the fleet); a fresh cluster."""
        with self.lock:
            self.store.reset()
            self.events_index.clear()
            self._event_deadline.clear()
            self._event_heap.clear()
            self.deletion.reset()
            for c in self.controllers:
                c.reset()
            self.bootstrap()

    def restore(self, data: dict[str, Any]) -> None:
        """Load a snapshot and rebuild every controller's bookkeeping from the objects."""
        with self.lock:
            self.store.load(data)
            self.install_crds()
            counters = data.get("counters") or {}
            self.ip_counter = int(counters.get("ip", 0))
            self.svc_counter = int(counters.get("svc", 0))
            self.events_index.clear()
            self._event_deadline.clear()
            self._event_heap.clear()
            self.deletion.reset()
            for c in self.controllers:
                c.reset()
            for ev in self.store.iter("events"):
                inv = ev.get("involvedObject") or {}
                self.events_index[
                    (inv.get("uid", ""), ev.get("reason", ""), inv.get("fieldPath", ""))
                ] = (
                    ev["metadata"]["namespace"],
                    ev["metadata"]["name"],
                )
                # A snapshot keeps no leases: the TTL runs from the event's last time stamp.
                stamp = ev.get("lastTimestamp") or ev["metadata"].get("creationTimestamp")
                written = parse_time(stamp).timestamp() if stamp else self.clock.time()
                self._set_event_deadline(ev, written)
            self.expire_events()
            # Replay every object as a create so controllers rebuild their indexes
            # (nodes before pods: the registry lists them first).
            for rt in self.registry.types:
                for obj in list(self.store.iter(rt.key)):
                    self._notify(rt, None, obj)
            self.settle()

    # -- helpers -------------------------------------------------------------------------

    def next_pod_ip(self) -> str:
        """A fresh pod IP from 10.244.0.0/16."""
        self.ip_counter += 1
        return ip_from_index("10.244", self.ip_counter)

    def next_service_ip(self) -> str:
        """A fresh ClusterIP from 10.96.0.0/16."""
        self.svc_counter += 1
        return ip_from_index("10.96", self.svc_counter)

    def _check_namespace(self, rt: ResourceType, ns: str, name: str) -> None:
        if not rt.namespaced:
            return
        nso = self.store.get("namespaces", "", ns)
        if nso is None:
            raise errors.not_found("namespaces", "", ns)
        if nso["metadata"].get("deletionTimestamp"):
            raise errors.forbidden(
                rt.plural,
                rt.group,
                name,
                f"unable to create new content in namespace {ns} because it is being terminated",
            )

    def _notify(self, rt: ResourceType, old: Obj | None, new: Obj | None) -> None:
        # No controller acts on Events, the commonest write (the kubelet's per container).
        if rt.kind == "Event":
            return
        for c in self.controllers:
            c.on_change(rt, old, new)

    def settle(self) -> None:
        """Run the controllers until none has anything left to do."""
        for _ in range(100):
            busy = False
            for c in self.controllers:
                busy = c.reconcile() or busy
            busy = self.deletion.finish() or busy
            if not busy:
                return

    # -- internal writes (used by the API verbs and by the controllers) -----------------

    # Named exception to ruff's C901 (max-complexity 12): the API server's create pipeline step by
    # step (defaults, admission, uniqueness, generateName, store).
    def create_object(  # noqa: C901
        self, rt: ResourceType, obj: Obj, admit: bool = True, dry_run: bool = False
    ) -> Obj:
        """Create with full metadata bookkeeping; ``admit`` runs quota and LimitRange."""
        meta = obj.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + suffix()
        obj["apiVersion"] = rt.api_version()
        obj["kind"] = rt.kind
        if rt.namespaced:
            meta["namespace"] = meta.get("namespace") or "default"
        else:
            meta.pop("namespace", None)
        ns, name = meta.get("namespace", ""), meta.get("name", "")
        if admit:
            validate_metadata(rt, obj)
            self._check_namespace(rt, ns, name)
        if self.store.get(rt.key, ns, name) is not None:
            raise errors.already_exists(rt.plural, rt.group, name)
        # managedFields are the API verbs' to write (verbs.py), never a client's.
        for k in ("deletionTimestamp", "deletionGracePeriodSeconds", "selfLink", "generation"):
            meta.pop(k, None)
        meta["uid"] = new_uid()
        meta["creationTimestamp"] = now()
        if rt.has_generation:
            meta["generation"] = 1
        if rt.kind == "Pod":
            default_pod(obj)
            if admit:
                why = podsecurity.refusal(self.store.get("namespaces", "", ns), obj)
                if why:
                    raise errors.forbidden(rt.plural, rt.group, name, why)
                self.quota.apply_limit_ranges(obj)
        elif rt.kind == "Service":
            default_service(obj, self)
        elif rt.kind == "Namespace":
            default_namespace(obj)
        elif rt.key == "jobs.batch":
            default_job(obj)
        if rt.is_custom or rt.key == "jobs.batch":
            self.kueue.mutate(rt, obj)
        if admit and rt.kind not in ("Event",):
            self.quota.admit(rt, obj, None)
        if dry_run:
            return obj
        meta["resourceVersion"] = self.store.next_rv()
        self.store.put(rt.key, obj)
        if rt.kind == "Event":
            self._set_event_deadline(obj, self.clock.time())
        self._notify(rt, None, obj)
        return obj

    def update_object(self, rt: ResourceType, obj: Obj, old: Obj | None = None) -> Obj:
        """Store a changed object: new resourceVersion, observers told. ``old`` is the
        previous stored object when the caller built ``obj`` as a copy."""
        obj["metadata"]["resourceVersion"] = self.store.next_rv()
        meta = obj["metadata"]
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            self.remove_object(rt, obj)
            return obj
        self.store.put(rt.key, obj)
        if rt.kind == "Event":
            self._set_event_deadline(obj, self.clock.time())
        self._notify(rt, old if old is not None else obj, obj)
        return obj

    def remove_object(self, rt: ResourceType, obj: Obj) -> None:
        """Drop an object from the store (no cascade, no finalizers)."""
        meta = obj["metadata"]
        gone = self.store.remove(rt.key, meta.get("namespace", ""), meta["name"])
        if rt.kind == "Event":
            self._event_deadline.pop((meta.get("namespace", ""), meta["name"]), None)
        if gone is not None:
            self._notify(rt, gone, None)

    def delete_object(self, rt: ResourceType, obj: Obj, propagation: str = "Background") -> Obj:
        """Delete honouring finalizers and cascading to dependents (see ``deletion.py``)."""
        return self.deletion.delete(rt, obj, propagation)

    def record_event(
        self,
        involved: Obj,
        etype: str,
        reason: str,
        message: str,
        component: str,
        host: str = "",
        field_path: str = "",
        dedup: str = "",
    ) -> None:
        """Write an Event about ``involved`` (``field_path``: the container it is about),
        bumping ``count`` of a repeat (same reason, or same ``dedup``, for that field)."""
        meta = involved["metadata"]
        ns = meta.get("namespace") or "default"
        key = (meta["uid"], dedup or reason, field_path)
        stamp = now()
        found = self.events_index.get(key)
        ev = self.store.get("events", *found) if found else None
        rt = self.rt("events")
        if ev is not None:
            ev["count"] = int(ev.get("count", 1)) + 1
            ev["message"] = message
            ev["lastTimestamp"] = stamp
            self.update_object(rt, ev)
            return
        name = f"{meta['name']}.{random_hex(16)}"
        source: dict[str, str] = {"component": component}
        if host:
            source["host"] = host
        ev = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": ns},
            "involvedObject": {
                "kind": involved["kind"],
                "apiVersion": involved["apiVersion"],
                "name": meta["name"],
                "namespace": meta.get("namespace", ""),
                "uid": meta["uid"],
                "resourceVersion": meta.get("resourceVersion", ""),
            },
            "reason": reason,
            "message": message,
            "type": etype,
            "count": 1,
            "source": source,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "eventTime": None,
            "reportingComponent": component,
            "reportingInstance": host or component,
        }
        if field_path:
            ev["involvedObject"]["fieldPath"] = field_path
        if not meta.get("namespace") and involved.get("kind") != "Namespace":
            ev["involvedObject"].pop("namespace")
        if self.store.get("namespaces", "", ns) is None:
            return
        # create_object's steps that apply to an Event the simulator writes itself (its name
        # is fresh; an Event takes no defaults, admission or generation), in its order.
        ev_meta = ev["metadata"]
        ev_meta["uid"] = new_uid()
        ev_meta["creationTimestamp"] = stamp
        ev_meta["resourceVersion"] = self.store.next_rv()
        self.store.put(rt.key, ev)
        self._set_event_deadline(ev, self.clock.time())
        self._notify(rt, None, ev)
        self.events_index[key] = (ns, name)

    # -- event TTL (kube-apiserver --event-ttl) -----------------------------------------

    def _set_event_deadline(self, ev: Obj, written: float) -> None:
        key = (ev["metadata"].get("namespace", ""), ev["metadata"]["name"])
        deadline = written + self.event_ttl
        self._event_deadline[key] = deadline
        heapq.heappush(self._event_heap, (deadline, *key))
        if len(self._event_heap) > 2 * len(self._event_deadline) + 1024:
            # Repeats leave superseded entries behind; rebuild rather than let them pile up.
            self._event_heap = [(d, ns, n) for (ns, n), d in self._event_deadline.items()]
            heapq.heapify(self._event_heap)

    def expire_events(self) -> int:
        """Remove every event whose TTL has run out since its last write; how many. Costs
        one comparison when none is due, so every request and tick may call it."""
        heap = self._event_heap
        if not heap or heap[0][0] > self.clock.time():
            return 0
        removed = 0
        with self.lock:
            rt = self.rt("events")
            current = self.clock.time()
            while heap and heap[0][0] <= current:
                deadline, ns, name = heapq.heappop(heap)
                if self._event_deadline.get((ns, name)) != deadline:
                    continue  # written again since: a later entry holds its deadline
                ev = self.store.get("events", ns, name)
                if ev is None:
                    self._event_deadline.pop((ns, name), None)
                    continue
                self.remove_object(rt, ev)
                removed += 1
        return removed

    def tick(self) -> None:
        """Time-driven work (pod start-up after the delay, Kueue's requeue backoff, event
        expiry, the scheduler's periodic retry of waiting pods, RayJob deadlines and TTLs,
        simulated Ray drivers ending, Job pod-failure backoff, the Ray autoscalers' passes,
        the cluster autoscaler's node boots, bookings and scale-down), then settle."""
        self.expire_events()
        with self.lock:
            if self.clock.time() >= self._next_flush:
                self._next_flush = self.clock.time() + UNSCHEDULABLE_FLUSH_SECONDS
                self.scheduler.flush_unschedulable()
                self.settle()
            started = self.kubelet.start_due_pods(time.monotonic())
            at = self.clock.time()
            # Each is called (no short-circuit): every due timer marks its object dirty.
            woke = [c.wake_due(at) for c in self.timed]
            scaled = self.autoscaler.tick()
            if self.kueue.requeue_due() or started or any(woke) or scaled:
                self.settle()

    def node_time(self) -> str:
        """Time stamp for node heartbeats and events (for tests that freeze nothing)."""
        return now_micro()


__all__ = ["ApiError", "Cluster"]
