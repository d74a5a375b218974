"""The metrics a state change drives: admissions, preemptions, wait and time to ready.

Called by :mod:`clusters.rows.transitions` for the rows it moved, and counted once the
move commits (a rolled-back move happened to nobody). Labels name the tenant and the
flavor, from a per-process cache of their names (one query for those it has not seen), so
a pass that moves a thousand rows costs no query per row.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable

from django.db import transaction
from django.db.models import Count

from clusters.domain.states import State
from clusters.models import ClusterEvent, ClusterRequest
from controlplane import metrics
from tenants.models import GpuFlavor, Tenant

# The reasons a move off a request's GPUs is a preemption (for another's sake), not its
# owner's or its own doing: a cohort's lender taking its quota back, a higher priority.
PREEMPTION_REASONS = frozenset({"reclaimed", "preempted"})
# Where a request is "ready" for its owner: a cluster's Ray is up; a job's driver runs.
_READY = frozenset({State.READY, State.RUNNING})

_tenant_slugs: dict[int, str] = {}
_flavor_names: dict[int, str] = {}


def _names(rows: list[ClusterRequest]) -> None:
    """Fill the caches for the tenants and flavors of ``rows`` (slugs and flavor names
    are never renamed, so a cached name stays true)."""
    tenants = {row.tenant_id for row in rows} - _tenant_slugs.keys()
    if tenants:
        _tenant_slugs.update(
            Tenant.objects.unscoped().filter(pk__in=tenants).values_list("pk", "slug")
        )
    flavors = {row.flavor_id for row in rows} - _flavor_names.keys()
    if flavors:
        _flavor_names.update(GpuFlavor.objects.filter(pk__in=flavors).values_list("pk", "name"))


def _been_ready(rows: list[ClusterRequest]) -> set[int]:
    """Those of ``rows`` that were ready before this move, whose event is written: a
    degraded cluster ready again is not a new time to ready (one grouped query)."""
    return set(
        ClusterEvent.objects.filter(cluster_id__in=[row.pk for row in rows], to_state__in=_READY)
        .values("cluster_id")
        .annotate(n=Count("id"))
        .filter(n__gt=1)
        .values_list("cluster_id", flat=True)
    )


def observe(
    moved: Iterable[tuple[ClusterRequest, str, datetime.datetime]],
    to: str,
    *,
    reason: str,
    now: datetime.datetime,
) -> None:
    """Count the moves of ``rows`` (each with the state it left and when it entered that
    state) to ``to``, once the transaction commits."""
    admitted = to == State.ADMITTED
    first_ready = to in _READY
    preempted = reason in PREEMPTION_REASONS
    rows = list(moved)
    again = _been_ready([row for row, _, _ in rows]) if first_ready else set()
    wanted = [
        (row, admitted and current == State.QUEUED, since)
        for row, current, since in rows
        if (admitted and current == State.QUEUED)
        or (first_ready and row.pk not in again)
        or preempted
    ]
    if not wanted:
        return
    _names([row for row, _, _ in wanted])
    # Read now: the rows in memory change once the move is written.
    moves = [
        (
            admission,
            _tenant_slugs.get(row.tenant_id, ""),
            _flavor_names.get(row.flavor_id, ""),
            row.workload,
            (now - since).total_seconds(),
            (now - row.created_at).total_seconds() if row.pk not in again else None,
        )
        for row, admission, since in wanted
    ]

    def count() -> None:
        for admission, tenant, flavor, workload, waited, ready_in in moves:
            if admission:
                metrics.ADMITTED.labels(tenant, flavor).inc()
                metrics.WAIT_SECONDS.labels(flavor).observe(waited)
            if first_ready and ready_in is not None:
                metrics.TIME_TO_READY.labels(workload, flavor).observe(ready_in)
            if preempted:
                metrics.PREEMPTED.labels(tenant, flavor, reason).inc()

    transaction.on_commit(count)
