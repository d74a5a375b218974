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
WL = "workloads.kueue.x-k8s.io"
CQ = "clusterqueues.kueue.x-k8s.io"
LQ = "localqueues.kueue.x-k8s.io"
RF = "resourceflavors.kueue.x-k8s.io"
WPC = "workloadpriorityclasses.kueue.x-k8s.io"
WATCHED = {WL, CQ, LQ, RF, WPC, "cohorts.kueue.x-k8s.io"}
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


def workload_name(rc_name: str, uid: str) -> str:
    """``raycluster-<name>-<hash>`` as Kueue names a job's Workload."""
    return f"raycluster-{rc_name}"[:57] + "-" + hashlib.sha1(uid.encode()).hexdigest()[:5]


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


def owning_raycluster(cluster: Cluster, wl: Obj) -> Obj | None:
    """The RayCluster that owns Workload ``wl``, if it still exists."""
    owner = next(
        (o for o in wl["metadata"].get("ownerReferences") or [] if o.get("kind") == "RayCluster"),
        None,
    )
    return cluster.store.get(RC, wl["metadata"]["namespace"], owner["name"]) if owner else None
