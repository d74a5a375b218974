"""The reconcile passes of a fleet benchmark's run, timed in this process once the product
is stopped: each member's pass alone (one after the other, so that none shares the CPUs
with another), full (every row folded) and steady (nothing changed, every row skipped),
then the fleet's pass (every member's side by side, as the ``reconcile`` task runs them).
Passes list every kind (``RECONCILE_WATCH`` off), the cost a pass has without informers.
"""

from __future__ import annotations

import time
from typing import Any

from benchmarks import support

RUNS = 5  # of each pass per member; the median is kept


def _one(member: Any) -> tuple[float, int, int]:
    """One pass over ``member``: seconds, Kubernetes API calls, rows folded."""
    from clusters.engine.member_scope import MemberScope
    from clusters.engine.reconciler import reconcile_once

    with support.count_kube_calls() as calls:
        started = time.perf_counter()
        report = reconcile_once(scope=MemberScope.of(member))
        elapsed = time.perf_counter() - started
    if report.errors:
        raise RuntimeError(f"the pass over {member.name} failed: {report.errors[:3]}")
    return elapsed, calls.total, report.folded


def _full(member: Any) -> tuple[float, int, int]:
    from clusters.engine import foldmemo
    from clusters.engine.member_scope import MemberScope

    scope = MemberScope.of(member)
    foldmemo.memo_of(scope.name, scope.home).clear()
    return _one(member)


def _fleet_pass() -> float:
    """Seconds of one pass over every member, side by side in threads."""
    from clusters.engine import member_passes

    started = time.perf_counter()
    outcome = member_passes.reconcile_fleet(lambda name, report: None, lambda: None)
    elapsed = time.perf_counter() - started
    member_passes.wait_for_passes(60.0)
    if outcome.failed or outcome.busy:
        raise RuntimeError(f"fleet pass: failed {outcome.failed}, busy {outcome.busy}")
    return elapsed


def time_passes() -> dict[str, Any]:
    """Each member's full and steady pass (median of :data:`RUNS`) with its rows, API calls
    and rows folded, and the fleet's steady pass."""
    from django.conf import settings
    from django.db.models import Count

    from clusters.models import ClusterRequest, KubeCluster

    settings.RECONCILE_WATCH = False
    # The fleet pass is timed to its end: the task's short wait for a member (after which
    # a slow member's pass goes on alone and is reported busy) keeps a beat tick moving,
    # it is no bound on what a pass costs.
    settings.RECONCILE_MEMBER_WAIT_SECONDS = 600.0
    members = list(KubeCluster.objects.order_by("placement_order"))
    rows = dict(
        ClusterRequest.objects.unscoped()
        .values("kube_cluster_id")
        .annotate(n=Count("id"))
        .values_list("kube_cluster_id", "n")
    )
    figures: dict[str, Any] = {"members": {}}
    for member in members:
        _one(member)  # settles what the stopped worker left (bundles, the memo)
        full = sorted(_full(member) for _ in range(RUNS))[RUNS // 2]
        steady = sorted(_one(member) for _ in range(RUNS))[RUNS // 2]
        figures["members"][member.name] = {
            "rows": rows.get(member.pk, 0),
            "full": full[0],
            "full_calls": full[1],
            "full_folded": full[2],
            "steady": steady[0],
            "steady_calls": steady[1],
            "steady_folded": steady[2],
        }
    figures["fleet_steady"] = sorted(_fleet_pass() for _ in range(RUNS))[RUNS // 2]
    return figures
