"""A small emulation of Kueue (v0.19, ``kueue.x-k8s.io/v1beta2``) for RayClusters.

With ``kueue=True``: a RayCluster created with the ``kueue.x-k8s.io/queue-name`` label is
suspended (Kueue's webhook), gets a Workload owned by it with one pod set per group, and
waits in its ClusterQueue. Admission runs in priority then FIFO order per ClusterQueue
(BestEffortFIFO, or StrictFIFO when the queue says so): each pod set gets the first flavor
whose ResourceFlavor ``nodeLabels`` agree with its nodeSelector and whose quota (nominal,
plus what the cohort's other queues leave unused, within ``borrowingLimit``) fits. An
admitted Workload gets ``status.admission`` and the ``QuotaReserved``/``Admitted``
conditions, and its RayCluster is unsuspended with the flavor's node labels injected. The
reservation is released when the RayCluster is deleted or suspended by its user. Not
emulated: preemption, fair sharing, admission checks, topology, partial admission.
"""

from __future__ import annotations

import copy
import hashlib
from collections import Counter
from typing import TYPE_CHECKING, Any

from kubesim import errors, quantity
from kubesim.admission import pod_totals
from kubesim.resources import ResourceType
from kubesim.scheduler import _tolerates
from kubesim.store import Obj
from kubesim.util import get_path, now, owner_ref

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
        self.need_admit = False

    @property
    def enabled(self) -> bool:
        """Kueue emulation is on."""
        return self.cluster.kueue_enabled

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
            from kubesim.operators.kuberay import desired_workers

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
        status = {"conditions": [_cond("QuotaReserved", False, reason, message, old)]}
        if any(c.get("type") == "Admitted" for c in old):
            status["conditions"].append(
                _cond("Admitted", False, "NoReservation", "The workload has no reservation", old)
            )
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
        self, cq: Obj, key: tuple[str, str], use: dict[str, Counter[tuple[str, str]]]
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
        if borrow_limit is not None:
            free = min(free, nominal + borrow_limit - own_used)
        return free

    def _assign(
        self, wl: Obj, cq: Obj, use: dict[str, Counter[tuple[str, str]]]
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
                            t.get("effect") == "PreferNoSchedule" or _tolerates(tolerations, t)
                            for t in taints
                        ):
                            continue
                        key = (fl["name"], res)
                        free = self._available(cq, key, use) - taken[key]
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
        wl["status"] = {
            "admission": {"clusterQueue": cq_name, "podSetAssignments": assignment},
            "conditions": [
                _cond(
                    "QuotaReserved",
                    True,
                    "QuotaReserved",
                    f"Quota reserved in ClusterQueue {cq_name}",
                    old,
                ),
                _cond("Admitted", True, "Admitted", "The workload is admitted", old),
            ],
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


def _status_conds(obj: Obj) -> list[dict[str, Any]]:
    old = get_path(obj, "status", "conditions", default=[])
    return [_cond("Active", True, "Ready", "Can admit new workloads", old)]
