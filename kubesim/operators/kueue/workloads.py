"""Kueue's job integration for RayClusters: one Workload per queued RayCluster.

A queued RayCluster (``kueue.x-k8s.io/queue-name``) gets a Workload it owns, named as Kueue
names it, with a ``head`` pod set and one per worker group at its desired size and the
priority of the WorkloadPriorityClass it names (none is made until that class exists).
When its user suspends an admitted RayCluster the Workload releases its quota and stops
queueing; when its user resumes one that is not admitted it goes back to the queue and the
RayCluster is suspended again until Kueue admits it.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from kubesim.operators.kuberay import desired_workers
from kubesim.operators.kueue.common import (
    ADMISSION_CONDITIONS,
    PRIORITY_LABEL,
    QUEUE_LABEL,
    RC,
    WL,
    WPC,
    condition,
    workload_name,
)
from kubesim.store import Obj
from kubesim.util import get_path, owner_ref

if TYPE_CHECKING:
    from kubesim.cluster import Cluster
    from kubesim.operators.kueue import Kueue


def workload_for(cluster: Cluster, rc: Obj) -> Obj | None:
    """The Workload Kueue made for RayCluster ``rc`` (it owns it), if any."""
    for key, ns, name in cluster.store.dependents(rc["metadata"]["uid"]):
        if key == WL:
            return cluster.store.get(key, ns, name)
    return None


def pod_sets(rc: Obj) -> list[dict[str, Any]]:
    """The Workload's pod sets: ``head`` and one per worker group, at full size."""
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


def sync_job(kueue: Kueue, rc: Obj) -> bool:
    """Bring RayCluster ``rc``'s Workload in line with it: create it (once its priority
    class exists), release its quota when its user suspends it, queue it again when its
    user resumes it. True when anything was written."""
    cluster = kueue.cluster
    wl = workload_for(cluster, rc)
    labels = rc["metadata"].get("labels") or {}
    suspended = bool((rc.get("spec") or {}).get("suspend"))
    if wl is None:
        prio, prio_ref = 0, None
        pc = labels.get(PRIORITY_LABEL)
        wpc = cluster.store.get(WPC, "", pc) if pc else None
        if pc and wpc is None:
            kueue.waiting_for_class.add((rc["metadata"]["namespace"], rc["metadata"]["name"]))
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
                "podSets": pod_sets(rc),
                "priority": prio,
                "active": True,
            },
        }
        if prio_ref:
            wl["spec"]["priorityClassRef"] = prio_ref
        if not suspended:
            rc["spec"]["suspend"] = True  # a job created running goes back to the queue
            cluster.update_object(cluster.rt(RC), rc)
        cluster.create_object(cluster.rt(WL), wl, admit=False)
        kueue.need_admit = True
        return True
    admitted = bool(get_path(wl, "status", "admission"))
    if suspended and admitted:
        # Suspended by its user: release the quota and stop queueing until resumed.
        set_pending(
            cluster, wl, "Stopped", "The workload is deactivated by the job's user", active=False
        )
        kueue.need_admit = True
        return True
    if not suspended and not admitted:
        # Resumed by its user (or started without admission): back into the queue.
        wl["spec"]["active"] = True
        wl["spec"]["podSets"] = pod_sets(rc)
        cluster.update_object(cluster.rt(WL), wl)
        rc["spec"]["suspend"] = True
        cluster.update_object(cluster.rt(RC), rc)
        cluster.kuberay.dirty.add((rc["metadata"]["namespace"], rc["metadata"]["name"]))
        kueue.need_admit = True
        return True
    return False


def set_pending(cluster: Cluster, wl: Obj, reason: str, message: str, active: bool = True) -> bool:
    """Workload ``wl`` holds no quota: ``QuotaReserved`` False with ``reason`` and
    ``message`` (and ``Admitted`` False if it was admitted); ``active`` False stops it
    queueing. True when anything changed."""
    old = get_path(wl, "status", "conditions", default=[])
    conditions = [condition("QuotaReserved", False, reason, message, old)]
    if any(c.get("type") == "Admitted" for c in old):
        conditions.append(
            condition("Admitted", False, "NoReservation", "The workload has no reservation", old)
        )
    conditions += [c for c in old if c.get("type") not in ADMISSION_CONDITIONS]
    status: dict[str, Any] = {"conditions": conditions}
    if get_path(wl, "status", "requeueState"):
        status["requeueState"] = wl["status"]["requeueState"]
    changed = wl.get("status") != status or wl["spec"].get("active", True) != active
    if changed:
        wl["status"] = status
        wl["spec"]["active"] = active
        cluster.update_object(cluster.rt(WL), wl)
    return changed
