"""A small emulation of Kueue (v0.19, ``kueue.x-k8s.io/v1beta2``) for RayClusters.

With ``kueue=True``: a RayCluster created with the ``kueue.x-k8s.io/queue-name`` label is
suspended (Kueue's webhook; a queued one with the in-tree autoscaler is refused, 403, as
Kueue's validating webhook does), gets a Workload owned by it with one pod set per group
(once the WorkloadPriorityClass it names exists), and waits in its ClusterQueue.
Admission runs in priority then FIFO order per ClusterQueue (BestEffortFIFO, or
StrictFIFO when the queue says so): each pod set gets the first flavor whose
ResourceFlavor ``nodeLabels`` agree with its nodeSelector and whose quota (nominal, plus
what the cohort's other queues leave unused, within ``borrowingLimit``) fits. An
admitted Workload gets ``status.admission`` and the ``QuotaReserved``/``Admitted``
conditions, and its RayCluster is unsuspended with the flavor's node labels injected. The
reservation is released when the RayCluster is deleted or suspended by its user.

Preemption, as the ClusterQueue's ``spec.preemption`` allows: a pending Workload that does
not fit may evict lower-priority Workloads of its own queue (``withinClusterQueue``) and
Workloads of queues of its cohort that borrow (``reclaimWithinCohort``), others' first,
then lowest priority, then newest, only as many as it needs and only if it then fits its
own nominal quota. An eviction (also :meth:`Kueue.evict`, the admin knob for
``PodsReadyTimeout`` and ``InactiveWorkload``) does what Kueue does: conditions
``Evicted`` (and ``Preempted``) True with Kueue's reasons and messages, the RayCluster
suspended, the quota released (``QuotaReserved`` False ``Pending``, ``Admitted`` False),
``Requeued``; a preempted Workload queues again at once, a timed-out one after a backoff
(``status.requeueState``), a deactivated one when ``spec.active`` is set back to true.
Re-admission turns ``Evicted``/``Preempted`` False ("Previously: ..."). Not emulated: fair
sharing, admission checks, topology, partial admission, ``borrowWithinCohort``.
"""

from __future__ import annotations

import copy
import datetime
import hashlib
from collections import Counter
from typing import TYPE_CHECKING, Any

from kubesim import errors, quantity
from kubesim.admission import pod_totals
from kubesim.operators.kuberay import desired_workers
from kubesim.resources import ResourceType
from kubesim.store import Obj
from kubesim.taints import tolerates
from kubesim.util import get_path, now, owner_ref, parse_time

if TYPE_CHECKING:
    from kubesim.cluster import Cluster

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
RC = "rayclusters.ray.io"
WL = "workloads.kueue.x-k8s.io"
CQ = "clusterqueues.kueue.x-k8s.io"
LQ = "localqueues.kueue.x-k8s.io"
RF = "resourceflavors.kueue.x-k8s.io"
WPC = "workloadpriorityclasses.kueue.x-k8s.io"
WATCHED = {WL, CQ, LQ, RF, WPC, "cohorts.kueue.x-k8s.io"}
VIS = "visibility.kueue.x-k8s.io"


def workload_name(rc_name: str, uid: str) -> str:
    """``raycluster-<name>-<hash>`` as Kueue names a job's Workload."""
    return f"raycluster-{rc_name}"[:57] + "-" + hashlib.sha1(uid.encode()).hexdigest()[:5]


# Why Kueue preempts, as its Preempted condition's reason and in its eviction message.
PREEMPTION_REASONS = {
    "InClusterQueue": "prioritization in the ClusterQueue",
    "InCohortReclamation": "reclamation within the cohort",
}
# Evicted reasons the admin knob can produce, and Kueue's message for each.
EVICTIONS = {
    "Preempted": "Preempted to accommodate a workload (UID: UNKNOWN, JobUID: UNKNOWN) due to "
    + PREEMPTION_REASONS["InClusterQueue"],
    "PodsReadyTimeout": "Exceeded the PodsReady timeout {ns}/{name}",
    "InactiveWorkload": "The workload is deactivated",
}
# Kueue's default waitForPodsReady.requeuingStrategy.backoffBaseSeconds.
REQUEUE_BACKOFF_SECONDS = 60
# Conditions the admission itself owns; the others (Evicted, Preempted, Requeued, ...)
# are carried over when admission changes.
_ADMISSION_CONDITIONS = ("QuotaReserved", "Admitted")


def _cond(
    ctype: str, status: bool, reason: str, message: str, old: list[dict[str, Any]]
) -> dict[str, Any]:
    text = "True" if status else "False"
    prev = next((c for c in old if c.get("type") == ctype), None)
    when = prev["lastTransitionTime"] if prev and prev.get("status") == text else now()
    return {
        "type": ctype,
        "status": text,
        "reason": reason,
        "message": message,
        "lastTransitionTime": when,
        "observedGeneration": 1,
    }


class Kueue:
    """Workloads for queued RayClusters, quota reservation, admission, visibility."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.reset()

    def reset(self) -> None:
        """Forget pending work."""
        self.dirty: set[tuple[str, str]] = set()
        # RayClusters naming a WorkloadPriorityClass that does not exist yet: Kueue cannot
        # build their Workload (it would not know its priority) and retries.
        self.waiting_for_class: set[tuple[str, str]] = set()
        self.need_admit = False

    @property
    def enabled(self) -> bool:
        """Kueue emulation is on."""
        return self.cluster.kueue_enabled

    def validate(self, rt: ResourceType, obj: Obj) -> None:
        """Kueue's RayCluster webhook (create and update): a queued RayCluster may not use
        the in-tree autoscaler, since Kueue admits it at one fixed size (elastic jobs, the
        exception, need an alpha feature gate that is off by default and not emulated)."""
        if not self.enabled or rt.key != RC:
            return
        if QUEUE_LABEL not in (obj.get("metadata", {}).get("labels") or {}):
            return
        if (obj.get("spec") or {}).get("enableInTreeAutoscaling") is True:
            raise errors.webhook_denied(
                "vraycluster.kb.io",
                "spec.enableInTreeAutoscaling: Invalid value: true: a kueue managed job can "
                "use autoscaling only when the ElasticJobsViaWorkloadSlices feature gate is "
                "on and the job is an elastic job",
            )

    def mutate(self, rt: ResourceType, obj: Obj) -> None:
        """Kueue's webhook: a queued RayCluster starts suspended."""
        if self.enabled and rt.key == RC and QUEUE_LABEL in (obj["metadata"].get("labels") or {}):
            obj.setdefault("spec", {})["suspend"] = True

    def on_change(self, rt: ResourceType, old: Obj | None, new: Obj | None) -> None:
        """Queued RayClusters and Kueue objects trigger reconciliation."""
        if not self.enabled:
            return
        ref = new if new is not None else old
        assert ref is not None
        if rt.key == RC and QUEUE_LABEL in (ref["metadata"].get("labels") or {}):
            if new is not None and old is not new:
                self.dirty.add((ref["metadata"]["namespace"], ref["metadata"]["name"]))
            if new is None:
                self.need_admit = True
        elif rt.key in WATCHED and old is not new:
            self.need_admit = True
            if rt.key == WPC and new is not None:
                self.dirty |= self.waiting_for_class
                self.waiting_for_class.clear()

    # -- reconcile -----------------------------------------------------------------------

    def reconcile(self) -> bool:
        """Create/refresh Workloads, then run an admission pass if anything changed."""
        if not self.enabled:
            return False
        busy = False
        while self.dirty:
            ns, name = self.dirty.pop()
            rc = self.cluster.store.get(RC, ns, name)
            if rc is not None and not rc["metadata"].get("deletionTimestamp"):
                busy = self._sync_job(rc) or busy
        if self.need_admit:
            self.need_admit = False
            busy = self._admit_all() or busy
        return busy

    def _workload_for(self, rc: Obj) -> Obj | None:
        for key, ns, name in self.cluster.store.dependents(rc["metadata"]["uid"]):
            if key == WL:
                return self.cluster.store.get(key, ns, name)
        return None

    def _pod_sets(self, rc: Obj) -> list[dict[str, Any]]:
        spec = rc.get("spec") or {}
        sets = [
            {
                "name": "head",
                "count": 1,
                "template": copy.deepcopy(get_path(spec, "headGroupSpec", "template", default={})),
            }
        ]
        for g in spec.get("workerGroupSpecs") or []:
            sets.append(
                {
                    "name": g.get("groupName", "workers"),
                    "count": desired_workers({**g, "suspend": False}),
                    "template": copy.deepcopy(g.get("template") or {}),
                }
            )
        return sets

    def _sync_job(self, rc: Obj) -> bool:
        wl = self._workload_for(rc)
        labels = rc["metadata"].get("labels") or {}
        suspended = bool((rc.get("spec") or {}).get("suspend"))
        if wl is None:
            prio, prio_ref = 0, None
            pc = labels.get(PRIORITY_LABEL)
            wpc = self.cluster.store.get(WPC, "", pc) if pc else None
            if pc and wpc is None:
                self.waiting_for_class.add((rc["metadata"]["namespace"], rc["metadata"]["name"]))
                return False
            if wpc is not None:
                prio = int(wpc.get("value", 0))
                prio_ref = {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": pc}
            wl = {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "Workload",
                "metadata": {
                    "name": workload_name(rc["metadata"]["name"], rc["metadata"]["uid"]),
                    "namespace": rc["metadata"]["namespace"],
                    "labels": {"kueue.x-k8s.io/job-uid": rc["metadata"]["uid"]},
                    "ownerReferences": [owner_ref(rc)],
                },
                "spec": {
                    "queueName": labels[QUEUE_LABEL],
                    "podSets": self._pod_sets(rc),
                    "priority": prio,
                    "active": True,
                },
            }
            if prio_ref:
                wl["spec"]["priorityClassRef"] = prio_ref
            if not suspended:
                rc["spec"]["suspend"] = True  # a job created running goes back to the queue
                self.cluster.update_object(self.cluster.rt(RC), rc)
            self.cluster.create_object(self.cluster.rt(WL), wl, admit=False)
            self.need_admit = True
            return True
        admitted = bool(get_path(wl, "status", "admission"))
        if suspended and admitted:
            # Suspended by its user: release the quota and stop queueing until resumed.
            self._set_pending(
                wl, "Stopped", "The workload is deactivated by the job's user", active=False
            )
            self.need_admit = True
            return True
        if not suspended and not admitted:
            # Resumed by its user (or started without admission): back into the queue.
            wl["spec"]["active"] = True
            wl["spec"]["podSets"] = self._pod_sets(rc)
            self.cluster.update_object(self.cluster.rt(WL), wl)
            rc["spec"]["suspend"] = True
            self.cluster.update_object(self.cluster.rt(RC), rc)
            self.cluster.kuberay.dirty.add((rc["metadata"]["namespace"], rc["metadata"]["name"]))
            self.need_admit = True
            return True
        return False

    def _set_pending(self, wl: Obj, reason: str, message: str, active: bool = True) -> bool:
        old = get_path(wl, "status", "conditions", default=[])
        conditions = [_cond("QuotaReserved", False, reason, message, old)]
        if any(c.get("type") == "Admitted" for c in old):
            conditions.append(
                _cond("Admitted", False, "NoReservation", "The workload has no reservation", old)
            )
        conditions += [c for c in old if c.get("type") not in _ADMISSION_CONDITIONS]
        status: dict[str, Any] = {"conditions": conditions}
        if get_path(wl, "status", "requeueState"):
            status["requeueState"] = wl["status"]["requeueState"]
        changed = wl.get("status") != status or wl["spec"].get("active", True) != active
        if changed:
            wl["status"] = status
            wl["spec"]["active"] = active
            self.cluster.update_object(self.cluster.rt(WL), wl)
        return changed

    # -- admission -----------------------------------------------------------------------

    def _usage(self) -> dict[str, Counter[tuple[str, str]]]:
        """Reserved quota per ClusterQueue as (flavor, resource) -> amount."""
        use: dict[str, Counter[tuple[str, str]]] = {}
        for wl in self.cluster.store.iter(WL):
            adm = get_path(wl, "status", "admission")
            if not adm:
                continue
            counter = use.setdefault(adm["clusterQueue"], Counter())
            for psa in adm.get("podSetAssignments") or []:
                for res, flavor in (psa.get("flavors") or {}).items():
                    amount = (psa.get("resourceUsage") or {}).get(res, "0")
                    counter[(flavor, res)] += quantity.amount(res, amount)
        return use

    @staticmethod
    def _quota(cq: Obj) -> dict[tuple[str, str], tuple[int, int | None]]:
        out: dict[tuple[str, str], tuple[int, int | None]] = {}
        for rg in get_path(cq, "spec", "resourceGroups", default=[]):
            for fl in rg.get("flavors") or []:
                for r in fl.get("resources") or []:
                    bl = r.get("borrowingLimit")
                    out[(fl["name"], r["name"])] = (
                        quantity.amount(r["name"], r.get("nominalQuota", 0)),
                        quantity.amount(r["name"], bl) if bl is not None else None,
                    )
        return out

    def _available(
        self,
        cq: Obj,
        key: tuple[str, str],
        use: dict[str, Counter[tuple[str, str]]],
        nominal_only: bool = False,
    ) -> int:
        quota = self._quota(cq)
        nominal, borrow_limit = quota.get(key, (0, 0))
        own_used = use.get(cq["metadata"]["name"], Counter())[key]
        cohort = get_path(cq, "spec", "cohortName")
        if not cohort:
            return nominal - own_used
        # What the cohort has left in total (others may be borrowing our quota: without
        # preemption we cannot take it back), capped by our own borrowing limit.
        total, used = 0, 0
        for member in self.cluster.store.iter(CQ):
            if get_path(member, "spec", "cohortName") != cohort:
                continue
            total += self._quota(member).get(key, (0, 0))[0]
            used += use.get(member["metadata"]["name"], Counter())[key]
        free = total - used
        if nominal_only:
            return min(free, nominal - own_used)
        if borrow_limit is not None:
            free = min(free, nominal + borrow_limit - own_used)
        return free

    def _assign(
        self,
        wl: Obj,
        cq: Obj,
        use: dict[str, Counter[tuple[str, str]]],
        nominal_only: bool = False,
    ) -> tuple[list[dict[str, Any]] | None, str]:
        """Flavors for every pod set, or None and the reason none fit."""
        taken: Counter[tuple[str, str]] = Counter()
        assignments = []
        cq_name = cq["metadata"]["name"]
        for ps in wl["spec"].get("podSets") or []:
            req, _ = pod_totals(ps.get("template") or {})
            count = int(ps.get("count", 1))
            selector = get_path(ps, "template", "spec", "nodeSelector", default={})
            chosen: dict[str, str] = {}
            why = ""
            for res, per_pod in sorted(req.items()):
                if not per_pod:
                    continue
                need = per_pod * count
                for rg in get_path(cq, "spec", "resourceGroups", default=[]):
                    if res not in (rg.get("coveredResources") or []):
                        continue
                    for fl in rg.get("flavors") or []:
                        rf = self.cluster.store.get(RF, "", fl["name"])
                        labels = get_path(rf, "spec", "nodeLabels", default={})
                        if any(k in selector and selector[k] != v for k, v in labels.items()):
                            continue
                        # Kueue skips a flavor whose nodeTaints the pod set does not
                        # tolerate (the flavor's own tolerations count as added).
                        tolerations = [
                            *get_path(ps, "template", "spec", "tolerations", default=[]),
                            *get_path(rf, "spec", "tolerations", default=[]),
                        ]
                        taints = get_path(rf, "spec", "nodeTaints", default=[])
                        if not all(
                            t.get("effect") == "PreferNoSchedule" or tolerates(tolerations, t)
                            for t in taints
                        ):
                            continue
                        key = (fl["name"], res)
                        free = self._available(cq, key, use, nominal_only) - taken[key]
                        if free >= need:
                            chosen[res] = fl["name"]
                            taken[key] += need
                            break
                        short = quantity.format_resource(res, need - max(free, 0))
                        why = (
                            f"couldn't assign flavors to pod set {ps['name']}: insufficient "
                            f"unused quota for {res} in flavor {fl['name']}, {short} more "
                            "needed"
                        )
                    break
                if res not in chosen:
                    if not why:
                        why = (
                            f"couldn't assign flavors to pod set {ps['name']}: resource "
                            f"{res} unavailable in ClusterQueue"
                        )
                    return None, why
            assignments.append(
                {
                    "name": ps["name"],
                    "count": count,
                    "flavors": chosen,
                    "resourceUsage": {
                        r: quantity.format_resource(r, v * count)
                        for r, v in sorted(req.items())
                        if r in chosen
                    },
                }
            )
        for key, v in taken.items():
            use.setdefault(cq_name, Counter())[key] += v
        return assignments, ""

    def _pending_by_cq(self) -> dict[str, list[Obj]]:
        out: dict[str, list[Obj]] = {}
        for wl in self.cluster.store.iter(WL):
            if get_path(wl, "status", "admission") or not wl["spec"].get("active", True):
                continue
            if get_path(wl, "status", "requeueState", "requeueAt"):
                continue  # backing off after a PodsReady timeout
            lq = self.cluster.store.get(
                LQ, wl["metadata"]["namespace"], wl["spec"].get("queueName", "")
            )
            cq_name = get_path(lq, "spec", "clusterQueue", default="") if lq else ""
            out.setdefault(cq_name, []).append(wl)
        for items in out.values():
            items.sort(
                key=lambda w: (
                    -int(w["spec"].get("priority") or 0),
                    w["metadata"]["creationTimestamp"],
                    int(w["metadata"]["resourceVersion"]),
                )
            )
        return out

    def _admit_all(self) -> bool:
        busy = False
        use = self._usage()
        for cq_name, pending in self._pending_by_cq().items():
            cq = self.cluster.store.get(CQ, "", cq_name) if cq_name else None
            strict = get_path(cq, "spec", "queueingStrategy") == "StrictFIFO"
            blocked = False
            for wl in pending:
                if cq is None:
                    lq = wl["spec"].get("queueName", "")
                    msg = (
                        f"ClusterQueue {cq_name} doesn't exist"
                        if cq_name
                        else f"LocalQueue {lq} doesn't exist"
                    )
                    busy = self._set_pending(wl, "Inadmissible", msg) or busy
                    continue
                assignment, why = (
                    (None, ("Workload is waiting behind an older one in a StrictFIFO queue"))
                    if blocked
                    else self._assign(wl, cq, use)
                )
                if assignment is None and not blocked and self._preempt_for(wl, cq, use):
                    use = self._usage()
                    assignment, why = self._assign(wl, cq, use)
                if assignment is None:
                    blocked = blocked or strict
                    busy = self._set_pending(wl, "Pending", why) or busy
                    continue
                self._admit(wl, cq_name, assignment)
                busy = True
        self._write_queue_status(use)
        return busy

    def _admit(self, wl: Obj, cq_name: str, assignment: list[dict[str, Any]]) -> None:
        old = get_path(wl, "status", "conditions", default=[])
        conditions = [
            _cond(
                "QuotaReserved",
                True,
                "QuotaReserved",
                f"Quota reserved in ClusterQueue {cq_name}",
                old,
            ),
            _cond("Admitted", True, "Admitted", "The workload is admitted", old),
        ]
        for c in old:
            if c.get("type") in _ADMISSION_CONDITIONS:
                continue
            if c.get("type") in ("Evicted", "Preempted") and c.get("status") == "True":
                # As Kueue does on a new reservation: the eviction is history now.
                c = _cond(
                    c["type"], False, "QuotaReserved", f"Previously: {c.get('message', '')}", old
                )
            conditions.append(c)
        wl["status"] = {
            "admission": {"clusterQueue": cq_name, "podSetAssignments": assignment},
            "conditions": conditions,
        }
        self.cluster.update_object(self.cluster.rt(WL), wl)
        owner = next(
            (
                o
                for o in wl["metadata"].get("ownerReferences") or []
                if o.get("kind") == "RayCluster"
            ),
            None,
        )
        rc = (
            self.cluster.store.get(RC, wl["metadata"]["namespace"], owner["name"])
            if owner
            else None
        )
        if rc is None:
            return
        flavors = {psa["name"]: set(psa["flavors"].values()) for psa in assignment}
        templates = [("head", get_path(rc, "spec", "headGroupSpec", "template"))] + [
            (g.get("groupName"), g.get("template"))
            for g in get_path(rc, "spec", "workerGroupSpecs", default=[])
        ]
        for name, template in templates:
            for fl in flavors.get(name, set()):
                labels = get_path(
                    self.cluster.store.get(RF, "", fl), "spec", "nodeLabels", default={}
                )
                if labels and isinstance(template, dict):
                    sel = template.setdefault("spec", {}).setdefault("nodeSelector", {})
                    sel.update(labels)
        rc["spec"]["suspend"] = False
        self.cluster.update_object(self.cluster.rt(RC), rc)
        self.cluster.kuberay.dirty.add((rc["metadata"]["namespace"], rc["metadata"]["name"]))
        self.cluster.record_event(
            wl, "Normal", "Admitted", f"Admitted by ClusterQueue {cq_name}", "kueue-admission"
        )

    # -- preemption and eviction ---------------------------------------------------------

    @staticmethod
    def _usage_of(wl: Obj) -> Counter[tuple[str, str]]:
        used: Counter[tuple[str, str]] = Counter()
        for psa in get_path(wl, "status", "admission", "podSetAssignments", default=[]):
            for res, flavor in (psa.get("flavors") or {}).items():
                amount = (psa.get("resourceUsage") or {}).get(res, "0")
                used[(flavor, res)] += quantity.amount(res, amount)
        return used

    def _preempt_for(self, wl: Obj, cq: Obj, use: dict[str, Counter[tuple[str, str]]]) -> bool:
        """Evict what ``wl`` needs gone, as ``cq``'s preemption policy allows; False if
        no allowed set of evictions would make it fit its own nominal quota."""
        policy = get_path(cq, "spec", "preemption", default={}) or {}
        within = policy.get("withinClusterQueue", "Never")
        reclaim = policy.get("reclaimWithinCohort", "Never")
        if within == "Never" and reclaim == "Never":
            return False
        cq_name = cq["metadata"]["name"]
        cohort = get_path(cq, "spec", "cohortName")
        priority = int(wl["spec"].get("priority") or 0)
        quotas = {c["metadata"]["name"]: c for c in self.cluster.store.iter(CQ)}
        candidates: list[tuple[tuple[int, int, int], Obj, str, str]] = []
        for other in self.cluster.store.iter(WL):
            adm = get_path(other, "status", "admission")
            if not adm or other is wl:
                continue
            other_cq = adm["clusterQueue"]
            other_priority = int(other["spec"].get("priority") or 0)
            admitted_at = next(
                (
                    c.get("lastTransitionTime", "")
                    for c in get_path(other, "status", "conditions", default=[])
                    if c.get("type") == "QuotaReserved"
                ),
                "",
            )
            if other_cq == cq_name:
                if within == "LowerPriority" and other_priority < priority:
                    order = (1, other_priority, _newest_first(admitted_at))
                    candidates.append((order, other, other_cq, "InClusterQueue"))
            elif cohort and get_path(quotas.get(other_cq), "spec", "cohortName") == cohort:
                if reclaim == "Never" or (
                    reclaim == "LowerPriority" and other_priority >= priority
                ):
                    continue
                order = (0, other_priority, _newest_first(admitted_at))
                candidates.append((order, other, other_cq, "InCohortReclamation"))
        candidates.sort(key=lambda c: c[0])
        trial = {name: Counter(counter) for name, counter in use.items()}
        chosen: list[tuple[Obj, str, str]] = []
        for _, other, other_cq, why in candidates:
            used = self._usage_of(other)
            if why == "InCohortReclamation":
                quota = self._quota(quotas[other_cq])
                borrowing = any(
                    trial.get(other_cq, Counter())[key] > quota.get(key, (0, 0))[0] for key in used
                )
                if not borrowing:
                    continue  # reclaim takes back only what a queue borrows
            trial.setdefault(other_cq, Counter()).subtract(used)
            chosen.append((other, other_cq, why))
            if self._fits(wl, cq, trial):
                break
        else:
            return False
        # Keep only what is needed: put back, newest choice last, what is not.
        for other, other_cq, why in list(reversed(chosen[:-1])):
            trial[other_cq].update(self._usage_of(other))
            if self._fits(wl, cq, trial):
                chosen.remove((other, other_cq, why))
            else:
                trial[other_cq].subtract(self._usage_of(other))
        uid = wl["metadata"].get("uid", "UNKNOWN")
        job = (wl["metadata"].get("labels") or {}).get("kueue.x-k8s.io/job-uid", "UNKNOWN")
        for other, _, why in chosen:
            message = (
                f"Preempted to accommodate a workload (UID: {uid}, JobUID: {job}) due to "
                f"{PREEMPTION_REASONS[why]}"
            )
            self._evict(other, "Preempted", message, preempted=why)
        return True

    def _fits(self, wl: Obj, cq: Obj, use: dict[str, Counter[tuple[str, str]]]) -> bool:
        trial = {name: Counter(counter) for name, counter in use.items()}
        return self._assign(wl, cq, trial, nominal_only=True)[0] is not None

    def evict(self, namespace: str, name: str, reason: str, message: str | None = None) -> Obj:
        """Evict the Workload of RayCluster ``namespace/name`` as Kueue would for ``reason``
        (``Preempted``, ``PodsReadyTimeout`` or ``InactiveWorkload``); see the module
        docstring. Returns the Workload."""
        if reason not in EVICTIONS:
            raise errors.bad_request(
                f"unknown eviction reason {reason!r}; use one of {', '.join(sorted(EVICTIONS))}"
            )
        rc = self.cluster.store.get(RC, namespace, name)
        wl = self._workload_for(rc) if rc is not None else None
        if wl is None or not get_path(wl, "status", "admission"):
            raise errors.bad_request(f"RayCluster {namespace}/{name} has no admitted Workload")
        text = message or EVICTIONS[reason].format(ns=namespace, name=wl["metadata"]["name"])
        self._evict(wl, reason, text, preempted="InClusterQueue" if reason == "Preempted" else "")
        return wl

    def _evict(self, wl: Obj, reason: str, message: str, preempted: str = "") -> None:
        old = get_path(wl, "status", "conditions", default=[])
        keep = ("QuotaReserved", "Admitted", "Evicted", "Preempted", "Requeued")
        conditions = [
            _cond("QuotaReserved", False, "Pending", message, old),
            _cond("Admitted", False, "NoReservation", "The workload has no reservation", old),
            _cond("Evicted", True, reason, message, old),
        ]
        if preempted:
            conditions.append(_cond("Preempted", True, preempted, message, old))
        # Kueue requeues a preempted Workload at once; a timed-out one after a backoff.
        conditions.append(_cond("Requeued", reason == "Preempted", reason, message, old))
        conditions += [c for c in old if c.get("type") not in keep]
        status: dict[str, Any] = {"conditions": conditions}
        if reason == "PodsReadyTimeout":
            count = int(get_path(wl, "status", "requeueState", "count", default=0) or 0) + 1
            due = datetime.datetime.now(datetime.UTC) + datetime.timedelta(
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
        owner = next(
            (
                o
                for o in wl["metadata"].get("ownerReferences") or []
                if o.get("kind") == "RayCluster"
            ),
            None,
        )
        rc = (
            self.cluster.store.get(RC, wl["metadata"]["namespace"], owner["name"])
            if owner
            else None
        )
        if rc is not None:
            # Kueue stops the job: KubeRay then deletes its pods.
            rc["spec"]["suspend"] = True
            self.cluster.update_object(self.cluster.rt(RC), rc)
            self.cluster.kuberay.dirty.add((rc["metadata"]["namespace"], rc["metadata"]["name"]))

    def requeue_due(self) -> bool:
        """Put back in the queue the Workloads whose PodsReady-timeout backoff is over."""
        if not self.enabled:
            return False
        current = datetime.datetime.now(datetime.UTC)
        due = False
        for wl in list(self.cluster.store.iter(WL)):
            at = get_path(wl, "status", "requeueState", "requeueAt")
            if not at or parse_time(at) > current:
                continue
            old = get_path(wl, "status", "conditions", default=[])
            wl["status"]["requeueState"] = {"count": wl["status"]["requeueState"].get("count", 1)}
            wl["status"]["conditions"] = [c for c in old if c.get("type") != "Requeued"] + [
                _cond("Requeued", True, "BackoffFinished", "The workload backoff was finished", old)
            ]
            self.cluster.update_object(self.cluster.rt(WL), wl)
            due = True
        if due:
            self.need_admit = True
        return due

    def _write_queue_status(self, use: dict[str, Counter[tuple[str, str]]]) -> None:
        pending = self._pending_by_cq()
        admitted: Counter[str] = Counter()
        lq_admitted: Counter[tuple[str, str]] = Counter()
        for wl in self.cluster.store.iter(WL):
            adm = get_path(wl, "status", "admission")
            if adm:
                admitted[adm["clusterQueue"]] += 1
                lq_admitted[(wl["metadata"]["namespace"], wl["spec"].get("queueName", ""))] += 1
        for cq in list(self.cluster.store.iter(CQ)):
            name = cq["metadata"]["name"]
            quota = self._quota(cq)
            flavors: dict[str, list[dict[str, str]]] = {}
            for (fl, res), (nominal, _) in quota.items():
                used = use.get(name, Counter())[(fl, res)]
                flavors.setdefault(fl, []).append(
                    {
                        "name": res,
                        "total": quantity.format_resource(res, used),
                        "borrowed": quantity.format_resource(res, max(0, used - nominal)),
                    }
                )
            usage = [{"name": fl, "resources": rs} for fl, rs in flavors.items()]
            status = {
                "pendingWorkloads": len(pending.get(name, [])),
                "reservingWorkloads": admitted[name],
                "admittedWorkloads": admitted[name],
                "flavorsReservation": usage,
                "flavorsUsage": usage,
                "conditions": _status_conds(cq),
            }
            if cq.get("status") != status:
                cq["status"] = status
                self.cluster.update_object(self.cluster.rt(CQ), cq)
        for lq in list(self.cluster.store.iter(LQ)):
            key = (lq["metadata"]["namespace"], lq["metadata"]["name"])
            cq_name = get_path(lq, "spec", "clusterQueue", default="")
            n_pending = sum(
                1
                for w in pending.get(cq_name, [])
                if (w["metadata"]["namespace"], w["spec"].get("queueName")) == key
            )
            status = {
                "pendingWorkloads": n_pending,
                "reservingWorkloads": lq_admitted[key],
                "admittedWorkloads": lq_admitted[key],
                "conditions": _status_conds(lq),
            }
            if lq.get("status") != status:
                lq["status"] = status
                self.cluster.update_object(self.cluster.rt(LQ), lq)

    # -- visibility API ------------------------------------------------------------------

    def visibility(self, method: str, path: str) -> dict[str, Any]:
        """``.../localqueues/{lq}/pendingworkloads`` and ``.../clusterqueues/{cq}/...``."""
        parts = [p for p in path.split("/") if p]
        if method != "GET" or len(parts) < 3 or parts[1] != VIS:
            raise errors.method_not_allowed()
        rest = parts[3:]
        if not self.enabled:
            raise errors.ApiError(
                404,
                "NotFound",
                "the server could not find the requested resource (Kueue emulation is off)",
            )
        pending = self._pending_by_cq()
        if (
            len(rest) == 5
            and rest[0] == "namespaces"
            and rest[2] == "localqueues"
            and rest[4] == "pendingworkloads"
        ):
            ns, lq_name = rest[1], rest[3]
            lq = self.cluster.store.get(LQ, ns, lq_name)
            if lq is None:
                raise errors.not_found("localqueues", VIS, lq_name)
            cq_name = get_path(lq, "spec", "clusterQueue", default="")
            items = [
                i
                for i in self._summary(pending.get(cq_name, []))
                if i["metadata"]["namespace"] == ns and i["localQueueName"] == lq_name
            ]
        elif len(rest) == 3 and rest[0] == "clusterqueues" and rest[2] == "pendingworkloads":
            if self.cluster.store.get(CQ, "", rest[1]) is None:
                raise errors.not_found("clusterqueues", VIS, rest[1])
            items = self._summary(pending.get(rest[1], []))
        else:
            raise errors.ApiError(
                404, "NotFound", "the server could not find the requested resource"
            )
        return {
            "kind": "PendingWorkloadsSummary",
            "apiVersion": f"{VIS}/v1beta2",
            "metadata": {},
            "items": items,
        }

    @staticmethod
    def _summary(queue: list[Obj]) -> list[dict[str, Any]]:
        per_lq: Counter[tuple[str, str]] = Counter()
        items = []
        for pos, wl in enumerate(queue):
            lq_key = (wl["metadata"]["namespace"], wl["spec"].get("queueName", ""))
            items.append(
                {
                    "metadata": {
                        "name": wl["metadata"]["name"],
                        "namespace": wl["metadata"]["namespace"],
                        "creationTimestamp": wl["metadata"]["creationTimestamp"],
                        "ownerReferences": wl["metadata"].get("ownerReferences", []),
                    },
                    "priority": int(wl["spec"].get("priority") or 0),
                    "localQueueName": lq_key[1],
                    "positionInClusterQueue": pos,
                    "positionInLocalQueue": per_lq[lq_key],
                }
            )
            per_lq[lq_key] += 1
        return items


def _newest_first(timestamp: str) -> int:
    """Sort key putting the most recently admitted Workload first."""
    if not timestamp:
        return 0
    return -int(parse_time(timestamp).timestamp())


def _status_conds(obj: Obj) -> list[dict[str, Any]]:
    old = get_path(obj, "status", "conditions", default=[])
    return [_cond("Active", True, "Ready", "Can admit new workloads", old)]
