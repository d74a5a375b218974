"""The dry-run's snapshot and recorded pass, kept per process while the database is unchanged.

Building them costs about an admission pass. They are kept under a digest of every row
the snapshot reads (on PostgreSQL one statement XORs ``hash_record_extended``), read
before the snapshot so a race costs a rebuild, never a stale entry; at most
:data:`KEEP_FOR`, since the snapshot depends on ``now``. A slow build
(:data:`SLOW_BUILD`) keeps answering for ``DRY_RUN_STALE_SECONDS`` while a thread records
the next, and the verdict says when it read the queue (``as_of``). SQLite reads afresh.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection
from django.utils import timezone

from clusters import admission as adm
from clusters.admission.recorded_pass import RecordedPass
from clusters.domain.states import State
from clusters.models import ClusterKind, ClusterRequest, Growth, Surge
from clusters.queue.free_capacity import FRESH_FOR
from clusters.queue.snapshot_reads import build_snapshot
from tenants.models import GpuFlavor, Quota, Tenant

log = logging.getLogger(__name__)

#: How long a recorded pass answers verdicts at most (its ``now`` is that old at worst).
KEEP_FOR = timedelta(seconds=5)
#: An entry that took this long to make (seconds) keeps answering while the next is made:
#: the verdict's latency goal (docs/benchmarks.md), which a reading as slow would break.
#: At 1,500 waiting requests a reading takes 0.1-0.2 s, at 15,000 about a second.
SLOW_BUILD = 0.1


@dataclass(frozen=True)
class _Entry:
    digest: str
    until: datetime
    snapshot: adm.Snapshot
    recorded: RecordedPass
    # Seconds it took to read the snapshot and record its pass.
    cost: float


_lock = threading.Lock()
_entry: _Entry | None = None
# Whether a background thread of this process is recording the next entry.
_refreshing = False


def _table_digest(alias: str, table: str, where: str = "") -> str:
    return (
        f"(SELECT count(*)::text || ':' || coalesce(bit_xor(hash_record_extended({alias}, 0)), 0)"
        f"::text FROM {table} {alias} {where})"
    )


def state_digest() -> str | None:
    """A digest of every row the admission snapshot reads (``None``: not PostgreSQL)."""
    if connection.vendor != "postgresql":
        return None
    requests = ClusterRequest._meta.db_table
    parts = [
        _table_digest(
            "r",
            requests,
            "WHERE r.state = %s OR (r.state = %s AND r.kind = %s) OR r.holds_gpus",
        ),
        _table_digest("t", Tenant._meta.db_table),
        _table_digest("q", Quota._meta.db_table),
        _table_digest("f", GpuFlavor._meta.db_table),
        _table_digest("s", Surge._meta.db_table),
        _table_digest("g", Growth._meta.db_table),
    ]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT " + " || '/' || ".join(parts),
            [State.QUEUED, State.SUSPENDED, ClusterKind.DEV],
        )
        row = cursor.fetchone()
    # The settings the snapshot reads belong to the key too (tests override them).
    tail = f"{settings.ADMISSION_AGING_SECONDS}/{settings.RECLAIM_GRACE_SECONDS}"
    return f"{row[0]}/{tail}" if row else None


def _valid_until(snapshot: adm.Snapshot, read_at: datetime) -> datetime:
    """When the snapshot would read differently with nothing written: the entry's end."""
    until = read_at + KEEP_FOR
    for p in snapshot.pending:
        ages_at = p.created_at + snapshot.aging
        if snapshot.now < ages_at < until:
            until = ages_at
    for flavor in GpuFlavor.objects.exclude(observed_at=None).only("observed_at"):
        if flavor.observed_at is None:
            continue
        stale_at = flavor.observed_at + FRESH_FOR
        if snapshot.now < stale_at < until:
            until = stale_at
    return until


def recorded_snapshot() -> tuple[adm.Snapshot, RecordedPass]:
    """The current snapshot and its recorded pass, from the cache while still valid (or,
    for a large queue, while the next one is recorded: see the module docstring)."""
    digest = state_digest()
    now = timezone.now()
    with _lock:
        entry = _entry
        # Never answer from the future (a clock set back, as tests do).
        usable = digest is not None and entry is not None and entry.snapshot.now <= now
        if usable and entry is not None:
            if entry.digest == digest and now < entry.until:
                return entry.snapshot, entry.recorded
            if _may_answer_stale(entry, now):
                # At most half of one core on readings while the queue keeps changing.
                if now >= entry.snapshot.now + timedelta(seconds=2 * entry.cost):
                    _refresh_in_background()
                return entry.snapshot, entry.recorded
    return _record(digest, now)


def _may_answer_stale(entry: _Entry, now: datetime) -> bool:
    stale_for = timedelta(seconds=float(settings.DRY_RUN_STALE_SECONDS))
    return entry.cost >= SLOW_BUILD and now < entry.snapshot.now + stale_for


def _record(digest: str | None, now: datetime) -> tuple[adm.Snapshot, RecordedPass]:
    """Read the snapshot as of ``now``, record its pass and keep them under ``digest``
    (read before the snapshot)."""
    global _entry
    started = time.perf_counter()
    # The collector is not paused here, unlike in the pass: what is read is kept, and
    # the collections it would set off after a pause land on the next verdicts.
    snapshot, _ = build_snapshot(now=now)
    recorded = RecordedPass(snapshot)
    if digest is not None:
        # Kept from when it is ready (reading a large queue takes seconds itself).
        entry = _Entry(
            digest,
            _valid_until(snapshot, timezone.now()),
            snapshot,
            recorded,
            time.perf_counter() - started,
        )
        with _lock:
            if _entry is None or _entry.snapshot.now <= snapshot.now:
                _entry = entry
    return snapshot, recorded


def _refresh_in_background() -> None:
    """Start recording the next entry in a thread of its own, unless one is (holding
    ``_lock``)."""
    global _refreshing
    if _refreshing:
        return
    _refreshing = True
    threading.Thread(target=_refresh, name="dry-run-record", daemon=True).start()


def _refresh() -> None:
    global _refreshing
    try:
        _record(state_digest(), timezone.now())
    except Exception:  # the next verdict records afresh, or starts another refresh
        log.exception("recording the dry-run's snapshot failed")
    finally:
        connection.close()  # this thread's own
        with _lock:
            _refreshing = False


def forget() -> None:
    """Drop the cached entry (tests, and anything that wants the next verdict fresh)."""
    global _entry
    with _lock:
        _entry = None
