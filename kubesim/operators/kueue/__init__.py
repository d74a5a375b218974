"""A small emulation of Kueue (v0.19, ``kueue.x-k8s.io/v1beta2``) for RayClusters, RayJobs,
RayServices (the ``ray.io/rayservice`` integration: a top-level job since Kueue 0.17,
suspended through ``spec.rayClusterConfig.suspend``) and batch/v1 Jobs: :class:`Kueue`, the
controller the cluster drives (webhooks, change tracking, the reconcile loop, evictions). A
queued job is suspended and gets a Workload (``workloads.py``, elastic jobs in
``slices.py``), admitted in priority then FIFO order
per ClusterQueue on the first flavor whose labels and quota fit (``admission.py``,
``quota.py``), preempting as ``spec.preemption`` allows (``preemption.py``); an eviction
does what Kueue does (conditions, suspend, release, requeue with backoff). Admission
checks: ``provisioning.py``; the visibility API: ``visibility.py``; DRA devices counted
through the Configuration's ``deviceClassMappings``: ``devices.py``. Topology Aware
Scheduling: ``topology.py``. Not emulated: fair sharing, partial admission,
``borrowWithinCohort``.
"""

from __future__ import annotations

import datetime
import json
from typing import TYPE_CHECKING, Any

from kubesim import errors
from kubesim.nodegroups import PR
from kubesim.operators.kueue import topology as tas
from kubesim.operators.kueue.admission import admit_all
from kubesim.operators.kueue.common import (
    ELASTIC_ANNOTATION,
    ELASTIC_GATE,
    EVICTIONS,
    JOB,
    KIND_KEYS,
    QUEUE_LABEL,
    RC,
    RJ,
    RS,
    SLICE_NAME,
    WATCHED,
    WL,
    WPC,
    condition,
    is_elastic,
    is_finished,
    owning_job,
    set_suspended,
    touch_job,
)
from kubesim.operators.kueue.devices import parse_mappings
from kubesim.operators.kueue.mkconfig import default_managed_by
from kubesim.operators.kueue.prebuilt import prebuilt_name, sync_prebuilt
from kubesim.operators.kueue.provisioning import AC, PRC, sync_checks
from kubesim.operators.kueue.slices import gate_templates, sync_slices, ungate
from kubesim.operators.kueue.topology import WORKLOAD_ANNOTATION
from kubesim.operators.kueue.visibility import pending_workloads
from kubesim.operators.kueue.workloads import sync_job, workloads_of
from kubesim.resources import ResourceType
from kubesim.store import Obj
from kubesim.util import get_path, parse_time

if TYPE_CHECKING:
    from kubesim.controller import ClusterView

CHECK_WATCHED = {WL, PR, AC, PRC}

# Kueue's default waitForPodsReady.requeuingStrategy.backoffBaseSeconds. Read when an
# eviction is written, from this module, so that tests can shorten it (monkeypatch).
REQUEUE_BACKOFF_SECONDS = 60


def queued_raycluster(obj: Obj) -> bool:
    """A RayCluster Kueue manages: labelled with a queue, and not the RayCluster of a
    RayJob or RayService (Kueue manages those; it skips children whose owner it manages,
    though KubeRay copies the owner's queue label onto them)."""
    meta = obj.get("metadata") or {}
    if QUEUE_LABEL not in (meta.get("labels") or {}):
        return False
    return not any(
        o.get("kind") in ("RayJob", "RayService") and o.get("controller")
        for o in meta.get("ownerReferences") or []
    )


def queued_job(key: str, obj: Obj) -> bool:
    """A job Kueue manages: a queued RayCluster (see above); a RayJob labelled with a
    queue that brings its own cluster (one using ``clusterSelector`` alone is not managed);
    a Job labelled with a queue whose controller is not a kind Kueue manages (a RayJob's
    submitter Job is not)."""
    meta = obj.get("metadata") or {}
    if key == RC:
        return queued_raycluster(obj)
    if key == RS:
        return QUEUE_LABEL in (meta.get("labels") or {})
    if key not in (RJ, JOB) or QUEUE_LABEL not in (meta.get("labels") or {}):
        return False
    if key == JOB:
        return not any(
            o.get("controller") and o.get("kind") in KIND_KEYS
            for o in meta.get("ownerReferences") or []
        )
    spec = obj.get("spec") or {}
    return not (spec.get("clusterSelector") and not spec.get("rayClusterSpec"))


# Kueue v0.19's webhooks on a queued job that uses Ray's in-tree autoscaler without being
# elastic (the RayCluster webhook names the gate and the annotation; the RayJob one not).
RAYCLUSTER_AUTOSCALING_REFUSAL = (
    "a kueue-managed RayCluster can use autoscaling only as an elastic job: enable the "
    f'ElasticJobsViaWorkloadSlices feature gate and set the "{ELASTIC_ANNOTATION}": "true" '
    "annotation"
)
AUTOSCALING_REFUSAL = (
    "a kueue managed job should only use autoscaling when workload slicing is enabled"
)
RAYSERVICE_AUTOSCALING_REFUSAL = (
    "a kueue managed service can use autoscaling only when the ElasticJobsViaWorkloadSlices "
    "feature gate is on and the service is an elastic job"
)
# Kueue's feature gates this emulation reads, with their v0.19 defaults
# (DynamicResourceAllocation: the ResourceClaimTemplate path, beta since v0.18;
# MultiKueueRemoteSpecSync: a RayService's serveConfigV2 forwarded to its worker copy,
# beta since v0.19).
FEATURE_GATES = {
    "ElasticJobsViaWorkloadSlices": True,
    "DynamicResourceAllocation": True,
    "MultiKueueRemoteSpecSync": True,
}


def parse_feature_gates(text: str | dict[str, bool] | None) -> dict[str, bool]:
    """Kueue's ``--feature-gates`` (``Name=true,Other=false``, or a dict) over the
    defaults; an unknown gate or a value other than true/false is a ValueError."""
    gates = dict(FEATURE_GATES)
    items = text.items() if isinstance(text, dict) else []
    if isinstance(text, str):
        pairs = [p.strip() for p in text.split(",") if p.strip()]
        parsed = []
        for pair in pairs:
            name, sep, value = pair.partition("=")
            if not sep or value.strip().lower() not in ("true", "false"):
                raise ValueError(f"invalid feature gate {pair!r}: want Name=true|false")
            parsed.append((name.strip(), value.strip().lower() == "true"))
        items = parsed
    for name, on in items:
        if name not in FEATURE_GATES:
            raise ValueError(
                f"unknown Kueue feature gate {name!r} (emulated: {', '.join(FEATURE_GATES)})"
            )
        gates[name] = bool(on)
    return gates


class Kueue:
    """Workloads for queued RayClusters, quota reservation, admission, visibility."""

    def __init__(self, cluster: ClusterView) -> None:
        self.cluster = cluster
        self.feature_gates = parse_feature_gates(cluster.kueue_feature_gates)
        # DeviceClass -> logical resource: its Configuration's deviceClassMappings.
        self.device_classes = parse_mappings(cluster.kueue_config)
        self.reset()

    def reset(self) -> None:
        """Forget pending work."""
        # The elastic job ungater has pods to look at (slices.py).
        self.need_ungate = False
        # (storage key, namespace, name) of jobs to sync.
        self.dirty: set[tuple[str, str, str]] = set()
        # Jobs naming a WorkloadPriorityClass that does not exist yet: Kueue cannot build
        # their Workload (it would not know its priority) and retries.
        self.waiting_for_class: set[tuple[str, str, str]] = set()
        # MultiKueue copies on a worker by the prebuilt Workload they name: (namespace,
        # Workload name) -> their (storage key, name). Kueue retries such a job until its
        # Workload exists, and reconciles it on every change of that Workload (created
        # again after a retry, admitted): those changes mark it dirty here.
        self.prebuilt: dict[tuple[str, str], set[tuple[str, str]]] = {}
        self.need_admit = False
        # Admission checks to look at (provisioning.py): Workloads, ProvisioningRequests,
        # AdmissionChecks or their configs changed.
        self.need_checks = True

    @property
    def enabled(self) -> bool:
        """Kueue emulation is on."""
        return self.cluster.kueue_enabled

    @property
    def elastic_enabled(self) -> bool:
        """Kueue's ElasticJobsViaWorkloadSlices feature gate (on by default)."""
        return self.feature_gates["ElasticJobsViaWorkloadSlices"]

    def validate(self, rt: ResourceType, obj: Obj) -> None:
        """Kueue's RayCluster and RayJob webhooks (create and update): a queued job may use
        the in-tree autoscaler only as an elastic job (Kueue admits others at one size)."""
        if not self.enabled:
            return
        if rt.key == RJ and QUEUE_LABEL in ((obj.get("metadata") or {}).get("labels") or {}):
            self._validate_rayjob(obj)
            return
        if rt.key == RS and queued_job(RS, obj):
            self._validate_rayservice(obj)
            return
        if rt.key != RC or not queued_raycluster(obj) or is_elastic(self.cluster, obj):
            return
        if (obj.get("spec") or {}).get("enableInTreeAutoscaling") is True:
            raise errors.webhook_denied(
                "vraycluster.kb.io",
                "spec.enableInTreeAutoscaling: Invalid value: true: "
                + RAYCLUSTER_AUTOSCALING_REFUSAL,
            )

    def _validate_rayservice(self, obj: Obj) -> None:
        """Kueue's RayService webhook (``vrayservice.kb.io``) for a queued RayService: an
        elastic one's head and worker templates carry the elastic gate (its defaulting
        webhook adds it on create); any other may not autoscale; at most 7 worker groups."""
        config = get_path(obj, "spec", "rayClusterConfig", default={}) or {}
        path = "spec.rayClusterConfig"
        causes = []
        # On create Kueue's defaulting webhook gates the templates before this one runs
        # (an object without a uid is being created): the gates are checked on updates.
        if is_elastic(self.cluster, obj) and (obj.get("metadata") or {}).get("uid"):
            templates = [("headGroupSpec", get_path(config, "headGroupSpec", "template"))]
            templates += [
                (f"workerGroupSpecs[{i}]", g.get("template"))
                for i, g in enumerate(config.get("workerGroupSpecs") or [])
            ]
            for where, template in templates:
                gates = get_path(template or {}, "spec", "schedulingGates", default=[]) or []
                if not any(g.get("name") == ELASTIC_GATE for g in gates):
                    causes.append(
                        f"{path}.{where}.template.spec.schedulingGates: Invalid value: "
                        f'{json.dumps(gates)}: must contain the "{ELASTIC_GATE}" scheduling gate'
                    )
        elif not is_elastic(self.cluster, obj) and config.get("enableInTreeAutoscaling") is True:
            causes.append(
                f"{path}.enableInTreeAutoscaling: Invalid value: true: "
                + RAYSERVICE_AUTOSCALING_REFUSAL
            )
        groups = len(config.get("workerGroupSpecs") or [])
        if groups > 7:
            causes.append(f"{path}.workerGroupSpecs: Too many: {groups}: must have at most 7 items")
        if causes:
            text = causes[0] if len(causes) == 1 else "[" + ", ".join(causes) + "]"
            raise errors.webhook_denied("vrayservice.kb.io", text)

    def _validate_rayjob(self, obj: Obj) -> None:
        """Kueue's RayJob webhook (``vrayjob.kb.io``) for a queued RayJob."""
        spec = obj.get("spec") or {}
        selector, cluster_spec = spec.get("clusterSelector"), spec.get("rayClusterSpec")
        if selector and cluster_spec:
            raise errors.webhook_denied(
                "vrayjob.kb.io",
                f"spec.clusterSelector: Invalid value: {json.dumps(selector)}: a kueue managed "
                "job should not use an existing cluster",
            )
        if selector:
            return  # a RayJob on an existing cluster is not managed by Kueue
        if not cluster_spec:
            raise errors.webhook_denied(
                "vrayjob.kb.io",
                "spec.rayClusterSpec: Required value: rayClusterSpec is required for "
                "Kueue-managed jobs that don't use clusterSelector",
            )
        causes = []
        if not spec.get("shutdownAfterJobFinishes"):
            causes.append(
                "spec.shutdownAfterJobFinishes: Invalid value: false: a kueue managed job "
                "should delete the cluster after finishing"
            )
        if cluster_spec.get("enableInTreeAutoscaling") is True and not is_elastic(
            self.cluster, obj
        ):
            causes.append(
                "spec.rayClusterSpec.enableInTreeAutoscaling: Invalid value: true: "
                + AUTOSCALING_REFUSAL
            )
        if causes:
            text = causes[0] if len(causes) == 1 else "[" + ", ".join(causes) + "]"
            raise errors.webhook_denied("vrayjob.kb.io", text)

    def mutate(self, rt: ResourceType, obj: Obj) -> None:
        """Kueue's webhooks on create: a queued job starts suspended; an elastic RayCluster
        or Job has its pod templates gated."""
        if not self.enabled:
            return
        if queued_job(rt.key, obj):
            set_suspended(rt.key, obj, True)
            if rt.key in (RJ, RC, RS):
                default_managed_by(self.cluster, obj)
        if rt.key in (RC, RS, JOB) and is_elastic(self.cluster, obj):
            gate_templates(rt.key, obj)

    def on_change(self, rt: ResourceType, old: Obj | None, new: Obj | None) -> None:
        """Queued RayClusters and Kueue objects trigger reconciliation."""
        if not self.enabled:
            return
        ref = new if new is not None else old
        assert ref is not None
        if rt.key in CHECK_WATCHED:
            # Also in-place writes (the autoscaler's status updates of a request).
            self.need_checks = True
            if rt.key == AC:
                self.need_admit = True  # a ClusterQueue's checks turn (in)active
        if rt.kind in ("Pod", "Node"):
            self._pod_or_node_changed(rt, old, new)
            return
        if rt.key == WL and any(
            psa.get("topologyAssignment")
            for psa in get_path(ref, "status", "admission", "podSetAssignments", default=[]) or []
        ):
            self.need_ungate = True  # an admitted TAS Workload's pods may be ungated
        if rt.key in (WL, RC) and is_elastic(self.cluster, ref):
            self._elastic_changed(rt, new)
        self._prebuilt_changed(rt.key, ref, gone=new is None)
        if queued_job(rt.key, ref):
            # A RayJob's or Job's status is written in place by its controller, and Kueue
            # must see it finish; an elastic RayCluster's replicas may be scaled in place:
            # those writes count too (syncing is idempotent).
            if new is not None and (
                old is not new or rt.key in (RJ, JOB) or is_elastic(self.cluster, new)
            ):
                self.dirty.add((rt.key, ref["metadata"]["namespace"], ref["metadata"]["name"]))
            if new is None:
                self.need_admit = True
        elif rt.key in WATCHED and old is not new:
            self.need_admit = True
            if rt.key == WPC and new is not None:
                self.dirty |= self.waiting_for_class
                self.waiting_for_class.clear()

    def _prebuilt_changed(self, key: str, obj: Obj, *, gone: bool) -> None:
        """A Workload changed: the copies that name it are synced again. A MultiKueue copy
        came, changed or went: :attr:`prebuilt` follows."""
        meta = obj["metadata"]
        if key == WL:
            for job_key, job_name in self.prebuilt.get((meta["namespace"], meta["name"]), ()):
                self.dirty.add((job_key, meta["namespace"], job_name))
            return
        if not prebuilt_name(obj) or not queued_job(key, obj):
            return
        at = (meta["namespace"], prebuilt_name(obj))
        if gone:
            jobs = self.prebuilt.get(at, set())
            jobs.discard((key, meta["name"]))
            if not jobs:
                self.prebuilt.pop(at, None)
        else:
            self.prebuilt.setdefault(at, set()).add((key, meta["name"]))

    def _pod_or_node_changed(self, rt: ResourceType, old: Obj | None, new: Obj | None) -> None:
        """A pod of an elastic or TAS job came, changed or went: the ungaters look again.
        A pod went or a node came: a Workload waiting for room in a topology may fit."""
        ref = new if new is not None else old
        assert ref is not None
        notes = ref["metadata"].get("annotations") or {}
        if notes.get(SLICE_NAME) or notes.get(WORKLOAD_ANNOTATION):
            self.need_ungate = True
        came_or_went = new is None or (rt.kind == "Node" and old is None)
        if came_or_went and tas.in_use(self.cluster):
            self.need_admit = True

    def _elastic_changed(self, rt: ResourceType, new: Obj | None) -> None:
        """An elastic Workload changed (the ungater looks again), or an elastic RayCluster:
        when a RayJob owns it, the Ray autoscaler scaling it scales the RayJob's job."""
        if rt.key == WL:
            self.need_ungate = True
            return
        for o in (new or {}).get("metadata", {}).get("ownerReferences") or []:
            if o.get("kind") == "RayJob" and o.get("controller"):
                self.dirty.add((RJ, new["metadata"]["namespace"], o["name"]))  # type: ignore[index]

    # -- reconcile -----------------------------------------------------------------------

    def reconcile(self) -> bool:
        """Create/refresh Workloads, then run an admission pass if anything changed."""
        if not self.enabled:
            return False
        busy = False
        while self.dirty:
            key, ns, name = self.dirty.pop()
            job = self.cluster.store.get(key, ns, name)
            if job is not None and not job["metadata"].get("deletionTimestamp"):
                sync = sync_slices if is_elastic(self.cluster, job) else sync_job
                if prebuilt_name(job):
                    sync = sync_prebuilt  # a MultiKueue copy on a worker
                busy = sync(self, job, key) or busy
        if self.need_admit:
            self.need_admit = False
            busy = admit_all(self) or busy
        if self.need_checks:
            self.need_checks = False
            busy = sync_checks(self) or busy
        if self.need_ungate:
            self.need_ungate = False
            busy = ungate(self) or busy
            busy = tas.ungate_tas(self.cluster) or busy
        return busy

    # -- eviction ------------------------------------------------------------------------

    def evict(self, namespace: str, name: str, reason: str, message: str | None = None) -> Obj:
        """Evict the Workload of RayCluster (else RayJob, else RayService) ``namespace/name``
        as Kueue would
        for ``reason`` (``Preempted``, ``PodsReadyTimeout`` or ``InactiveWorkload``); see the
        module docstring. Returns the Workload."""
        if reason not in EVICTIONS:
            raise errors.bad_request(
                f"unknown eviction reason {reason!r}; use one of {', '.join(sorted(EVICTIONS))}"
            )
        rc = self.cluster.store.get(RC, namespace, name)
        if rc is None or not queued_raycluster(rc):
            store = self.cluster.store
            rc = store.get(RJ, namespace, name) or store.get(RS, namespace, name) or rc
        held = [
            w
            for w in (workloads_of(self.cluster, rc) if rc is not None else [])
            if get_path(w, "status", "admission") and not is_finished(w)
        ]
        wl = held[-1] if held else None
        if wl is None:
            raise errors.bad_request(f"RayCluster {namespace}/{name} has no admitted Workload")
        text = message or EVICTIONS[reason].format(ns=namespace, name=wl["metadata"]["name"])
        self.evict_workload(
            wl, reason, text, preempted="InClusterQueue" if reason == "Preempted" else ""
        )
        return wl

    def evict_workload(self, wl: Obj, reason: str, message: str, preempted: str = "") -> None:
        """Evict admitted Workload ``wl`` for ``reason`` with ``message`` (``preempted``: the
        ``Preempted`` reason, for a preemption): its conditions as Kueue writes them, its
        quota released, its RayCluster suspended, a backoff for ``PodsReadyTimeout``."""
        old = get_path(wl, "status", "conditions", default=[])
        keep = ("QuotaReserved", "Admitted", "Evicted", "Preempted", "Requeued")
        conditions = [
            condition("QuotaReserved", False, "Pending", message, old),
            condition("Admitted", False, "NoReservation", "The workload has no reservation", old),
            condition("Evicted", True, reason, message, old),
        ]
        if preempted:
            conditions.append(condition("Preempted", True, preempted, message, old))
        # Kueue requeues a preempted Workload at once; a timed-out one after a backoff.
        conditions.append(condition("Requeued", reason == "Preempted", reason, message, old))
        conditions += [c for c in old if c.get("type") not in keep]
        status: dict[str, Any] = {"conditions": conditions}
        if reason == "PodsReadyTimeout":
            count = int(get_path(wl, "status", "requeueState", "count", default=0) or 0) + 1
            due = self._now() + datetime.timedelta(
                seconds=REQUEUE_BACKOFF_SECONDS * 2 ** (count - 1)
            )
            status["requeueState"] = {
                "count": count,
                "requeueAt": due.strftime("%Y-%m-%dT%H:%M:%SZ"),
            }
        wl["status"] = status
        if reason == "InactiveWorkload":
            wl["spec"]["active"] = False
        self.cluster.update_object(self.cluster.rt(WL), wl)
        self.need_admit = True  # it queues again (or its message changes)
        self.cluster.record_event(
            wl,
            "Normal",
            "Preempted" if reason == "Preempted" else f"EvictedDueTo{reason}",
            message,
            "kueue-admission",
        )
        found = owning_job(self.cluster, wl)
        if found is not None:
            # Kueue stops the job: KubeRay then deletes its pods (and a RayJob's cluster).
            set_suspended(*found, True)
            touch_job(self.cluster, *found)

    def _now(self) -> datetime.datetime:
        """The cluster clock's time (a test's ManualClock moves backoffs on)."""
        return datetime.datetime.fromtimestamp(self.cluster.clock.time(), datetime.UTC)

    def requeue_due(self) -> bool:
        """Put back in the queue the Workloads whose PodsReady-timeout backoff is over."""
        if not self.enabled:
            return False
        current = self._now()
        due = False
        for wl in list(self.cluster.store.iter(WL)):
            at = get_path(wl, "status", "requeueState", "requeueAt")
            if not at or parse_time(at) > current:
                continue
            old = get_path(wl, "status", "conditions", default=[])
            wl["status"]["requeueState"] = {"count": wl["status"]["requeueState"].get("count", 1)}
            wl["status"]["conditions"] = [c for c in old if c.get("type") != "Requeued"] + [
                condition(
                    "Requeued", True, "BackoffFinished", "The workload backoff was finished", old
                )
            ]
            self.cluster.update_object(self.cluster.rt(WL), wl)
            due = True
        if due:
            self.need_admit = True
        return due

    # -- visibility API ------------------------------------------------------------------

    def visibility(self, method: str, path: str) -> dict[str, Any]:
        """The visibility API's pending workloads (see ``visibility.py``)."""
        return pending_workloads(self.cluster, method, path)


__all__ = ["FEATURE_GATES", "REQUEUE_BACKOFF_SECONDS", "Kueue", "parse_feature_gates"]
