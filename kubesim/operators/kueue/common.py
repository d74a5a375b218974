"""Names and helpers the parts of the Kueue emulation share: label and resource keys, Kueue's
reasons and messages, conditions written as Kueue writes them, the name Kueue gives a job's
Workload, and the RayCluster that owns a Workload."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from kubesim.store import Obj
from kubesim.util import now

if TYPE_CHECKING:
    from kubesim.cluster import Cluster

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
RC = "rayclusters.ray.io"
RJ = "rayjobs.ray.io"
# The job kinds Kueue integrates here: storage key -> the kind's lower-case name, which
# prefixes the Workload's name.
JOB_KINDS = {RC: "raycluster", RJ: "rayjob"}
WL = "workloads.kueue.x-k8s.io"
CQ = "clusterqueues.kueue.x-k8s.io"
LQ = "localqueues.kueue.x-k8s.io"
RF = "resourceflavors.kueue.x-k8s.io"
WPC = "workloadpriorityclasses.kueue.x-k8s.io"
COHORT = "cohorts.kueue.x-k8s.io"
WATCHED = {WL, CQ, LQ, RF, WPC, COHORT}
VIS = "visibility.kueue.x-k8s.io"

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
# Conditions the admission itself owns; the others (Evicted, Preempted, Requeued, ...)
# are carried over when admission changes.
ADMISSION_CONDITIONS = ("QuotaReserved", "Admitted")


def workload_name(job_name: str, uid: str, kind: str = "raycluster") -> str:
    """``<kind>-<name>-<hash>`` as Kueue names a job's Workload."""
    return f"{kind}-{job_name}"[:57] + "-" + hashlib.sha1(uid.encode()).hexdigest()[:5]


def is_finished(wl: Obj) -> bool:
    """The Workload has the ``Finished`` condition: it no longer holds quota."""
    return any(
        c.get("type") == "Finished" and c.get("status") == "True"
        for c in (wl.get("status") or {}).get("conditions") or []
    )


def condition(
    ctype: str, status: bool, reason: str, message: str, old: list[dict[str, Any]]
) -> dict[str, Any]:
    """A Workload or queue condition; its ``lastTransitionTime`` is kept from ``old`` when
    the status does not change, as Kueue keeps it."""
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


def owning_job(cluster: Cluster, wl: Obj) -> tuple[str, Obj] | None:
    """The job (RayCluster or RayJob: its storage key and object) that owns Workload
    ``wl``, if it still exists."""
    for o in wl["metadata"].get("ownerReferences") or []:
        key = {"RayCluster": RC, "RayJob": RJ}.get(o.get("kind", ""))
        if key is not None:
            obj = cluster.store.get(key, wl["metadata"]["namespace"], o["name"])
            return (key, obj) if obj is not None else None
    return None


def owning_raycluster(cluster: Cluster, wl: Obj) -> Obj | None:
    """The RayCluster that owns Workload ``wl``, if it still exists."""
    found = owning_job(cluster, wl)
    return found[1] if found is not None and found[0] == RC else None


def touch_job(cluster: Cluster, key: str, job: Obj) -> None:
    """Write the job Kueue changed (suspend, node selectors) and have its operator look."""
    cluster.update_object(cluster.rt(key), job)
    ref = (job["metadata"]["namespace"], job["metadata"]["name"])
    # The operators ignore in-place writes (their own status writes): tell them.
    (cluster.kuberay if key == RC else cluster.rayjob).dirty.add(ref)


def cohort_root(cluster: Cluster, name: str) -> str:
    """The root of cohort ``name``'s tree: Cohort objects name their parent in
    ``spec.parentName``; a cohort without an object, or without a parent, is a root. The
    ClusterQueues of every cohort under one root borrow each other's unused quota. (Kueue
    disables a tree with a cycle; here the walk stops at the first cohort seen twice.)"""
    seen = {name}
    while True:
        obj = cluster.store.get(COHORT, "", name)
        parent = ((obj or {}).get("spec") or {}).get("parentName")
        if not parent or parent in seen:
            return name
        seen.add(parent)
        name = parent
