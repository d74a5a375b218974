"""Which running requests to stop for a waiting one, protection windows included.

Reclaim (borrowed quota given back) and priority preemption (a higher class takes a
lower one's GPUs) both walk candidates in victim order and take them until what they
free covers a deficit. A candidate still inside its protection window
(``Running.protected_until``: its class's minimum run time or checkpoint grace) is never
taken; when only protected candidates could cover the deficit, :func:`pick` says which
one's window binds and when the waiting request should then start, so that its reason
and ETA say so (docs/preemption.md). Pure.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal

from clusters.admission.snapshot import PROD, Running

ZERO = Decimal(0)


def victim_order(r: Running) -> tuple[int, int, int, float]:
    """Who goes first: the lowest class, then dev before prod, the lowest priority, then
    the newest."""
    return (
        r.class_value,
        1 if r.kind == PROD else 0,
        r.priority,
        -(r.admitted_at.timestamp() if r.admitted_at else 0.0),
    )


def may_be_stopped(r: Running) -> bool:
    """Whether ``r``'s kind lets it be stopped for another request at all: suspended
    (``reclaimable``) or given notice and requeued (``preemptible``)."""
    return r.reclaimable or r.preemptible


@dataclass(frozen=True)
class Pick:
    """The outcome of :func:`pick`: the victims chosen and what they free (enough, or
    nothing is chosen), else, when protected candidates could make up the rest, the
    one whose protection ends last among those needed and when the request would start
    (its window's end plus the notice of those it needs)."""

    chosen: list[Running] = field(default_factory=list)
    freed: Decimal = ZERO
    enough: bool = False
    waits_for: Running | None = None
    starts_at: datetime | None = None


def pick(
    candidates: Iterable[Running],
    deficit: Decimal,
    *,
    now: datetime,
    grace: timedelta,
    amount: Callable[[Running, Decimal], Decimal] | None = None,
) -> Pick:
    """Take ``candidates`` (in victim order) until they free ``deficit``, skipping the
    protected ones. ``amount(r, taken)``: what ``r`` frees toward the deficit when
    ``taken`` GPUs of its tenant are taken already (0: skip it; default: its GPUs).
    A request already warned (``suspend_at``) is never protected: see
    :meth:`~clusters.admission.snapshot.Running.protected`."""
    taken: dict[str, Decimal] = defaultdict(Decimal)
    chosen: list[Running] = []
    freed = ZERO

    def take(r: Running) -> bool:
        nonlocal freed
        gives = r.gpus if amount is None else amount(r, taken[r.tenant])
        if gives <= 0:
            return False
        taken[r.tenant] += r.gpus
        freed += gives
        return True

    protected: list[Running] = []
    for r in candidates:
        if freed >= deficit:
            break
        if r.protected(now):
            protected.append(r)
            continue
        if take(r):
            chosen.append(r)
    if freed >= deficit:
        return Pick(chosen, freed, enough=True)
    # Not enough now: would the protected ones, as their windows end, make up the rest?
    # Every candidate was seen (the walk stops early only once it has enough).
    needed = list(chosen)
    for r in sorted(protected, key=lambda r: (r.protected_until, victim_order(r))):
        if freed >= deficit:
            break
        if take(r):
            needed.append(r)
    if freed < deficit or not protected:
        return Pick()
    binding = max((r for r in needed if r.protected(now)), key=lambda r: r.protected_until or now)
    starts_at = max(max(r.protected_until or now, now) + r.notice(grace) for r in needed)
    return Pick(waits_for=binding, starts_at=starts_at)
