"""Kueue's preemption, as a ClusterQueue's ``spec.preemption`` allows.

A pending Workload that does not fit may evict lower-priority Workloads of its own queue
(``withinClusterQueue: LowerPriority``) and Workloads of queues of its cohort that borrow
(``reclaimWithinCohort``): other queues' first, then lowest priority, then the most
recently admitted; only as many as it needs, and only if it then fits its own nominal
quota. The evictions themselves are :meth:`Kueue.evict_workload`.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from kubesim.operators.kueue.common import CQ, PREEMPTION_REASONS, WL, cohort_root, is_finished
from kubesim.operators.kueue.quota import Usage, fits, flavor_quotas, workload_usage
from kubesim.store import Obj
from kubesim.util import get_path, parse_time

if TYPE_CHECKING:
    from kubesim.controller import ClusterView
    from kubesim.operators.kueue import Kueue


# Named exception to ruff's C901 (max-complexity 12): Kueue's preemption candidates in Kueue's own
# order; each branch is one of its rules.
def preempt_for(kueue: Kueue, wl: Obj, cq: Obj, use: Usage) -> bool:  # noqa: C901
    """Evict what ``wl`` needs gone, as ``cq``'s preemption policy allows; False if
    no allowed set of evictions would make it fit its own nominal quota."""
    policy = get_path(cq, "spec", "preemption", default={}) or {}
    within = policy.get("withinClusterQueue", "Never")
    reclaim = policy.get("reclaimWithinCohort", "Never")
    if within == "Never" and reclaim == "Never":
        return False
    cluster = kueue.cluster
    cq_name = cq["metadata"]["name"]
    cohort = get_path(cq, "spec", "cohortName")
    priority = int(wl["spec"].get("priority") or 0)
    quotas = {c["metadata"]["name"]: c for c in cluster.store.iter(CQ)}
    candidates: list[tuple[tuple[int, int, int], Obj, str, str]] = []
    for other in cluster.store.iter(WL):
        adm = get_path(other, "status", "admission")
        if not adm or other is wl or is_finished(other):
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
        elif cohort and _same_tree(
            cluster, cohort, get_path(quotas.get(other_cq), "spec", "cohortName")
        ):
            if reclaim == "Never" or (reclaim == "LowerPriority" and other_priority >= priority):
                continue
            order = (0, other_priority, _newest_first(admitted_at))
            candidates.append((order, other, other_cq, "InCohortReclamation"))
    candidates.sort(key=lambda c: c[0])
    trial = {name: Counter(counter) for name, counter in use.items()}
    chosen: list[tuple[Obj, str, str]] = []
    for _, other, other_cq, why in candidates:
        used = workload_usage(other)
        if why == "InCohortReclamation":
            quota = flavor_quotas(quotas[other_cq])
            borrowing = any(
                trial.get(other_cq, Counter())[key] > quota.get(key, (0, 0))[0] for key in used
            )
            if not borrowing:
                continue  # reclaim takes back only what a queue borrows
        trial.setdefault(other_cq, Counter()).subtract(used)
        chosen.append((other, other_cq, why))
        if fits(cluster, wl, cq, trial):
            break
    else:
        return False
    # Keep only what is needed: put back, newest choice last, what is not.
    for other, other_cq, why in list(reversed(chosen[:-1])):
        trial[other_cq].update(workload_usage(other))
        if fits(cluster, wl, cq, trial):
            chosen.remove((other, other_cq, why))
        else:
            trial[other_cq].subtract(workload_usage(other))
    uid = wl["metadata"].get("uid", "UNKNOWN")
    job = (wl["metadata"].get("labels") or {}).get("kueue.x-k8s.io/job-uid", "UNKNOWN")
    for other, _, why in chosen:
        message = (
            f"Preempted to accommodate a workload (UID: {uid}, JobUID: {job}) due to "
            f"{PREEMPTION_REASONS[why]}"
        )
        kueue.evict_workload(other, "Preempted", message, preempted=why)
    return True


def _newest_first(timestamp: str) -> int:
    """Sort key putting the most recently admitted Workload first."""
    if not timestamp:
        return 0
    return -int(parse_time(timestamp).timestamp())


def _same_tree(cluster: ClusterView, cohort: str, other: str | None) -> bool:
    """Whether cohort ``other`` is in the tree of ``cohort`` (reclaim spans a tree)."""
    return bool(other) and cohort_root(cluster, str(other)) == cohort_root(cluster, cohort)
