"""The built-in admission pass: read a snapshot, let the pure decision choose, apply it.

Only one pass runs at a time: on PostgreSQL a transaction-scoped advisory lock (a pass
started meanwhile returns at once with ``busy``, and the task asks for a pass again, so that
what changed after the running pass read its snapshot is seen); on SQLite the write
transaction serialises passes. Admitting is a conditional UPDATE from ``queued``, so a
request deleted while the pass ran is not resurrected. The quota ledger is not stored apart
from the rows: it is the sum of ``gpus`` over rows that hold GPUs, so it cannot drift from
the clusters.
"""

from __future__ import annotations

import logging

from django.db import connection, transaction
from django.utils import timezone

from clusters import admission as adm
from clusters.domain.states import State
from clusters.models import ClusterRequest
from clusters.queue import growth_demand, surge_demand
from clusters.queue.interface import PassResult
from clusters.queue.snapshot_reads import build_snapshot
from clusters.queue.writeback import (
    admit,
    apply_capacity_words,
    apply_earmarks,
    apply_reclaim,
    apply_waiting,
    ask_for_capacity,
)
from clusters.rows import enqueue
from controlplane import metrics
from controlplane.gc_pause import collector_paused

log = logging.getLogger(__name__)
_LOCK_KEY = 0x6761_6E67  # "gang"


def _try_lock() -> bool:
    if connection.vendor != "postgresql":
        return True
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_xact_lock(%s)", [_LOCK_KEY])
        row = cursor.fetchone()
        return bool(row and row[0])


def run_admission_pass() -> PassResult:
    """Admit what fits now and tell every waiting request where it stands."""
    result = PassResult()
    # The collector would walk the whole process several times over for a long queue.
    with collector_paused(), transaction.atomic():
        if not _try_lock():
            result.skipped = result.busy = True
            return result
        now = timezone.now()
        snapshot, queued = build_snapshot(now=now)
        decision = adm.decide(snapshot)
        requests = surge_demand.requests_only(decision.admitted)
        chosen = {
            row.pk: row
            for row in ClusterRequest.objects.unscoped()
            .filter(pk__in=requests, state=State.QUEUED)
            .select_related("tenant", "flavor", "owner")
        }
        result.admitted = admit(
            [chosen[pk] for pk in requests if pk in chosen],
            now=now,
            placed=decision.placed,
            clusters=decision.clusters,
            notes=decision.placement_notes,
            domains=decision.domains,
        )
        enqueue.provision_many(result.admitted)
        apply_waiting(queued, decision)
        surge_demand.write_back(decision, now=now)
        growth_demand.write_back(decision, now=now)
        for pk in ask_for_capacity(decision, now=now):
            enqueue.after_commit(enqueue.REQUEST_CAPACITY, pk)
        apply_capacity_words(now=now)
        apply_earmarks(decision, now=now)
        result.waiting = len(decision.waiting)
        result.suspended = apply_reclaim(decision, now=now)
        metrics.ADMISSION_PASSES.inc()
    return result
