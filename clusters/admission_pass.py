"""The admission pass: read a snapshot, let the pure decision function choose, apply it.

Only one pass runs at a time: on PostgreSQL a transaction-scoped advisory lock (a second
pass started meanwhile returns at once — the running one will see its requests); on
SQLite the write transaction itself serialises passes. Admitting is a conditional
UPDATE from ``queued``, so a request deleted while the pass ran is not resurrected.
The quota ledger is never stored separately: it is the sum of ``gpus`` over rows in
states that hold quota, so it cannot drift from the clusters that hold GPUs.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal

from django.db import connection, transaction
from django.utils import timezone

from clusters.models import ClusterRequest
from clusters.states import State
from clusters.transitions import transition
from controlplane import metrics
from tenants.models import Quota

log = logging.getLogger(__name__)
_LOCK_KEY = 0x6761_6E67  # "gang"


@dataclass
class PassResult:
    """What a pass admitted and how many requests it left waiting."""

    admitted: list[int] = field(default_factory=list)
    waiting: int = 0
    skipped: bool = False


def _try_lock() -> bool:
    if connection.vendor != "postgresql":
        return True
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_xact_lock(%s)", [_LOCK_KEY])
        return bool(cursor.fetchone()[0])


def _decide_fifo(queued: list[ClusterRequest]) -> tuple[list[ClusterRequest], dict[int, str]]:
    """Oldest first, admitted while it fits the tenant's nominal quota on its flavor."""
    used: dict[tuple[int, int], Decimal] = defaultdict(Decimal)
    for row in (
        ClusterRequest.objects.unscoped()
        .filter(holds_gpus=True)
        .values_list("tenant_id", "flavor_id", "gpus")
    ):
        used[(row[0], row[1])] += row[2]
    nominal = {(q.tenant_id, q.flavor_id): Decimal(q.gpus) for q in Quota.objects.unscoped().all()}
    admitted: list[ClusterRequest] = []
    waiting: dict[int, str] = {}
    for row in sorted(queued, key=lambda r: (r.created_at, r.pk)):
        key = (row.tenant_id, row.flavor_id)
        if used[key] + row.gpus <= nominal.get(key, Decimal(0)):
            used[key] += row.gpus
            admitted.append(row)
        else:
            waiting[row.pk] = "tenant_quota"
    return admitted, waiting


def run_admission_pass() -> PassResult:
    """Admit what fits now; see the module docstring."""
    from clusters import tasks

    result = PassResult()
    with transaction.atomic():
        if not _try_lock():
            result.skipped = True
            return result
        queued = list(
            ClusterRequest.objects.unscoped()
            .filter(state=State.QUEUED)
            .select_related("tenant", "flavor")
        )
        admitted, waiting = _decide_fifo(queued)
        now = timezone.now()
        for row in admitted:
            expires = now + timedelta(hours=row.ttl_hours) if row.ttl_hours else None
            if transition(
                row,
                State.ADMITTED,
                reason="admitted",
                message="admitted; applying its RayCluster",
                admitted_at=now,
                expires_at=expires,
                queue_position=None,
                queue_flavor_position=None,
                queue_reason="",
                queue_message="",
                queue_eta=None,
            ):
                result.admitted.append(row.pk)
                metrics.ADMITTED.labels(row.tenant.slug).inc()
        result.waiting = len(waiting)
        metrics.ADMISSION_PASSES.inc()
        admitted_ids = list(result.admitted)

        def nudge() -> None:
            for pk in admitted_ids:
                tasks.provision_cluster.delay(pk)

        transaction.on_commit(nudge)
    return result
