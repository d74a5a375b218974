"""The admission pass: read a snapshot, let the pure decision function choose, apply it.

Only one pass runs at a time: on PostgreSQL a transaction-scoped advisory lock (a pass
started meanwhile returns at once — the running one sees its requests, and every
create nudges another pass after commit); on SQLite the write transaction serialises
passes. Admitting is a conditional UPDATE from ``queued``, so a request deleted while the
pass ran is not resurrected. The quota ledger is not stored apart from the rows: it is
the sum of ``gpus`` over rows that hold GPUs, so it cannot drift from the clusters.
In Kueue mode Kueue decides and the reconciler folds its verdicts in
(:mod:`clusters.kueue_mode`); the pass does nothing.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from clusters import admission as adm
from clusters.models import ClusterRequest
from clusters.queueing import admit, apply_earmarks, apply_reclaim, apply_waiting, build_snapshot
from clusters.states import State
from controlplane import metrics

log = logging.getLogger(__name__)
_LOCK_KEY = 0x6761_6E67  # "gang"


@dataclass
class PassResult:
    """What a pass admitted, how many requests it left waiting and what it reclaimed."""

    admitted: list[int] = field(default_factory=list)
    waiting: int = 0
    suspended: list[int] = field(default_factory=list)
    skipped: bool = False


def _try_lock() -> bool:
    if connection.vendor != "postgresql":
        return True
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_xact_lock(%s)", [_LOCK_KEY])
        return bool(cursor.fetchone()[0])


def run_admission_pass() -> PassResult:
    """Admit what fits now and tell every waiting request where it stands."""
    from clusters import tasks

    result = PassResult()
    if settings.QUEUE_MODE == "kueue":
        result.skipped = True
        return result
    with transaction.atomic():
        if not _try_lock():
            result.skipped = True
            return result
        now = timezone.now()
        snapshot, queued = build_snapshot(now=now)
        decision = adm.decide(snapshot)
        chosen = {
            row.pk: row
            for row in ClusterRequest.objects.unscoped()
            .filter(pk__in=decision.admitted, state=State.QUEUED)
            .select_related("tenant", "flavor", "owner")
        }
        result.admitted = admit([chosen[pk] for pk in decision.admitted if pk in chosen], now=now)
        for pk in result.admitted:
            metrics.ADMITTED.labels(chosen[pk].tenant.slug).inc()
        apply_waiting(queued, decision)
        apply_earmarks(decision, now=now)
        result.waiting = len(decision.waiting)
        result.suspended = apply_reclaim(decision, now=now)
        metrics.ADMISSION_PASSES.inc()
        admitted_ids = list(result.admitted)

        def nudge() -> None:
            for pk in admitted_ids:
                tasks.provision_cluster.delay(pk)

        transaction.on_commit(nudge)
    return result
