"""What a reconcile pass may skip: the rows whose fold last changed nothing, with the
same inputs since.

Folding is deterministic in the row and its objects (the clock aside), so such a row
would do nothing again. A row's *stamp* is its ``xmin`` and the columns a fold reads, of
its kind's own table too (``Details.folded``); its objects' is their ``resourceVersion``s.
Always folded: rows waiting on the autoscaler or near expiry, Kueue's and SQLite's (no
stamps), and everything every ``RECONCILE_FULL_PASS_SECONDS``. The memo is the worker
process's own.
"""

from __future__ import annotations

import time
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection

from clusters.domain.states import State
from clusters.domain.workload_kinds import Details, derived, details_tables
from clusters.engine.member_scope import MemberScope
from clusters.models import ClusterRequest

# The columns a fold reads besides the row's identity (tenant and name never change).
_FOLDED_COLUMNS = (
    "state",
    "state_reason",
    "deletion_reason",
    "kind",
    "flavor_id",
    "workers",
    "min_workers",
    "expires_at",
    "expiry_warned_at",
    "holds_gpus",
)


@dataclass(frozen=True)
class LiveRow:
    """A row that is not deleted, as the light query reads it: enough to key its objects,
    decide whether its fold may be skipped and keep the pass's fleet-wide duties (the
    objects no row wants, the tenants' namespace bundles)."""

    pk: int
    tenant_id: int
    name: str
    state: str
    workload: str
    expires_at: datetime | None
    asks_for_capacity: bool
    stamp: tuple[Any, ...]


def live_rows(scope: MemberScope | None = None) -> list[LiveRow]:
    """Every row that is not deleted (of ``scope``'s member), with its stamp, in one
    query (no model instances: at thousands of rows they would cost more than the rest
    of a steady pass)."""
    postgres = connection.vendor == "postgresql"
    placed, params = scope.sql("r") if scope is not None else ("", [])
    with connection.cursor() as cursor:
        cursor.execute(
            derived(f"foldmemo.live.{postgres}", lambda: _live_sql(postgres)) + placed,
            [State.DELETED.value, *params],
        )
        fetched = cursor.fetchall()
    expires = 6 + _FOLDED_COLUMNS.index("expires_at")
    state = 6 + _FOLDED_COLUMNS.index("state")
    return [
        LiveRow(
            pk=row[0],
            tenant_id=row[1],
            name=row[2],
            state=row[state],
            workload=row[3],
            expires_at=row[expires],
            asks_for_capacity=bool(row[4]),
            stamp=row[5:],
        )
        for row in fetched
    ]


def _live_sql(postgres: bool) -> str:
    """The light query: the rows' stamps, with each kind's own table that its fold reads
    LEFT JOINed (NULL for the rows of other kinds): its ``xmin`` and those columns."""
    folding = [d for d in details_tables() if d.folded]
    tables: list[tuple[str, Details]] = [(f"d{i}", d) for i, d in enumerate(folding)]
    stamps = [("r", _FOLDED_COLUMNS)] + [(alias, d.folded) for alias, d in tables]
    columns = ", ".join(
        ", ".join(
            [f"{alias}.xmin::text" if postgres else "NULL"]
            + [f"{alias}.{column}" for column in folded]
        )
        for alias, folded in stamps
    )
    joins = "".join(
        f" LEFT JOIN {d.table} {alias} ON {alias}.{d.key} = r.id" for alias, d in tables
    )
    return (
        f"SELECT r.id, r.tenant_id, r.name, r.workload, r.capacity_request, {columns} "
        f"FROM {ClusterRequest._meta.db_table} r{joins} WHERE r.state <> %s"
    )


class FoldMemo:
    """The stamps of rows whose last fold changed nothing (see the module docstring)."""

    def __init__(self) -> None:
        self._quiet: dict[int, Hashable] = {}
        self._full_at = time.monotonic()

    def begin(self) -> None:
        """Start a pass: forget everything once a full pass is due."""
        every = settings.RECONCILE_FULL_PASS_SECONDS
        if time.monotonic() - self._full_at >= every:
            self._quiet.clear()
            self._full_at = time.monotonic()

    def unchanged(self, pk: int, stamp: Hashable) -> bool:
        """Whether the row was folded without effect with this very stamp."""
        return self._quiet.get(pk) == stamp

    def settle(self, quiet: dict[int, Hashable], acted: Iterable[int], live: Iterable[int]) -> None:
        """End a pass that ran to its end: remember the rows it folded without effect,
        forget those it folded with one (or an error), and those no longer live."""
        live_pks = set(live)
        self._quiet = {pk: s for pk, s in self._quiet.items() if pk in live_pks}
        for pk in acted:
            self._quiet.pop(pk, None)
        self._quiet.update(quiet)

    def clear(self) -> None:
        """Forget every row (tests and benchmarks start from nothing)."""
        self._quiet.clear()


MEMO = FoldMemo()  # the home member's (and settings' cluster's, without members)
_MEMOS: dict[str, FoldMemo] = {}


def forget_all() -> None:
    """Forget every member's memo (tests start from nothing)."""
    MEMO.clear()
    for memo in _MEMOS.values():
        memo.clear()


def memo_of(member: str, home: bool) -> FoldMemo:
    """The memo of the passes over ``member``: each member's passes fold their own rows."""
    if home:
        return MEMO
    return _MEMOS.setdefault(member, FoldMemo())


def always_folded(row: LiveRow, now: datetime) -> bool:
    """Rows folded whatever their stamps say (see the module docstring)."""
    if row.asks_for_capacity:
        return True
    if row.expires_at is None:
        return False
    warning = timedelta(minutes=settings.EXPIRY_WARNING_MINUTES)
    return row.expires_at - now <= warning


def skips_allowed(backend_folds_incrementally: bool) -> bool:
    """Whether this pass may skip rows at all."""
    return backend_folds_incrementally and connection.vendor == "postgresql"
