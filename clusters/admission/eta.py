"""When a waiting request should start: a forward simulation per pool.

Each pool's waiting requests are walked in queue order against a heap of future releases
(running clusters' expiries, this pass's admissions, the requests ahead once started):
O(n log n), nothing re-decided. An estimate, not a promise: it assumes nothing new
arrives, clusters live until their TTL, a request is held only by its current reason's
pool, and ignores whole-node placement of prod workers. A pool whose blockers have no
TTL yields ``None`` ("unknown"). A gang that waits for one domain of a topology level
to hold all its workers (pool ``("d", flavor, level)``) waits for gangs pinned to domains
of that same level to end (:func:`_domain_etas`); other releases are not known to free
nodes of any one domain, so they are not counted.
"""

from __future__ import annotations

import heapq
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from clusters.admission.ledger import Ledger, Pool
from clusters.admission.snapshot import (
    DEV,
    RECLAIM_PENDING,
    Pending,
    Running,
    Snapshot,
)
from clusters.admission.topology_room import placement_level


@dataclass(frozen=True)
class Wait:
    """A request left waiting, with its reason and the pool that blocks it (a request
    that accepts several flavors waits once per flavor, each with its own pool)."""

    pending: Pending
    reason: str
    pool: Pool

    @property
    def key(self) -> WaitKey:
        """What its ETA is keyed by: the request and the flavor it waits on."""
        return (self.pending.id, self.pending.flavor)


# (request id, flavor): a request waiting on several flavors has an ETA on each.
WaitKey = tuple[int, str]


# (when it frees, gpus, cpu, memory, tenant, flavor, owner, is_dev)
_Release = tuple[datetime, Decimal, Decimal, Decimal, str, str, int, bool]


def _releases(snap: Snapshot, admitted: Sequence[Pending], reclaimed: set[int]) -> list[_Release]:
    """Every future release: running clusters at expiry (reclaimed ones at the end of the
    grace period at the latest) and this pass's admissions after their TTL."""
    out: list[_Release] = []
    item: Running | Pending
    for item in snap.running:
        ends = item.expires_at
        if item.id in reclaimed:
            suspends = item.suspend_at or snap.now + item.notice(snap.reclaim_grace)
            ends = suspends if ends is None else min(ends, suspends)
        if ends is not None:
            out.append(_release(ends, item))
    for item in admitted:
        if item.ttl is not None:
            out.append(_release(snap.now + item.ttl, item))
    return out


def _release(ends: datetime, item: Running | Pending) -> _Release:
    return (
        ends,
        item.gpus,
        item.cpu,
        item.memory_gib,
        item.tenant,
        item.flavor,
        item.owner,
        item.kind == DEV,
    )


def _amount(pool: Pool, gpus: Decimal, cpu: Decimal, memory: Decimal) -> Decimal:
    if pool[0] == "tcpu":
        return cpu
    if pool[0] == "tmem":
        return memory
    return gpus


def _simulate(
    start: datetime,
    available: Decimal,
    releases: Iterable[tuple[datetime, Decimal]],
    queue: Sequence[tuple[WaitKey, Decimal, timedelta | None]],
) -> dict[WaitKey, datetime | None]:
    """Walk ``queue`` (key, need, ttl) in order against the release heap of one pool."""
    heap = list(releases)
    heapq.heapify(heap)
    clock = start
    out: dict[WaitKey, datetime | None] = {}
    for rid, need, ttl in queue:
        while available < need and heap:
            when, amount = heapq.heappop(heap)
            available += amount
            clock = max(clock, when)
        if available < need:
            out[rid] = None  # what blocks it never frees: unknown
            continue
        out[rid] = clock
        available -= need
        if ttl is not None:
            heapq.heappush(heap, (clock + ttl, need))
    return out


def _user_eta(p: Pending, led: Ledger, mine: list[tuple[datetime, Decimal]]) -> datetime | None:
    """When enough of the owner's own dev clusters expire to clear the per-user caps."""
    tenant = led.tenant(p.tenant)
    has_clusters, has_gpus = led.owner_has(p)
    clusters = has_clusters + 1 - (tenant.max_dev_clusters_per_user or 10**9)
    gpus = has_gpus + p.gpus - (tenant.max_dev_gpus_per_user or 10**9)
    when = led.snap.now
    for ends, freed in mine:  # sorted by the caller, once per owner
        if clusters <= 0 and gpus <= 0:
            break
        clusters -= 1
        gpus -= freed
        when = ends
    return when if clusters <= 0 and gpus <= 0 else None


def estimate(
    snap: Snapshot,
    led: Ledger,
    admitted: Sequence[Pending],
    waits: Sequence[Wait],
    reclaimed: set[int] | None = None,
    reclaim_etas: dict[int, datetime] | None = None,
    protected_etas: Mapping[WaitKey, datetime] | None = None,
) -> dict[WaitKey, datetime | None]:
    """The ETA of every waiting request on every flavor it waits on, given the ledger
    after the pass. ``protected_etas``: when the requests that wait for running ones'
    protection windows to end (:mod:`clusters.admission.victims`) could take them; their
    ETA is that, or what frees first in their pool if sooner."""
    out = _estimate(snap, led, admitted, waits, reclaimed, reclaim_etas)
    for key, when in (protected_etas or {}).items():
        if key in out:
            known = out[key]
            out[key] = when if known is None else min(known, when)
    return out


# Named exception to ruff's C901 (max-complexity 12): one simulated clock over releases, aging and
# reclaim; its branches share the loop's state.
def _estimate(  # noqa: C901
    snap: Snapshot,
    led: Ledger,
    admitted: Sequence[Pending],
    waits: Sequence[Wait],
    reclaimed: set[int] | None,
    reclaim_etas: dict[int, datetime] | None,
) -> dict[WaitKey, datetime | None]:
    releases = _releases(snap, admitted, reclaimed or set())
    by_pool: dict[Pool, list[Wait]] = defaultdict(list)
    out: dict[WaitKey, datetime | None] = {}
    for w in waits:
        if w.reason == RECLAIM_PENDING:
            out[w.key] = (reclaim_etas or {}).get(w.pending.id, snap.now + snap.reclaim_grace)
        elif w.pool[0] == "never":
            out[w.key] = None
        else:
            by_pool[w.pool].append(w)
    if not by_pool:
        return out
    # Index releases once, by the keys pools are made of.
    by_tenant_flavor: dict[tuple[str, str], list[_Release]] = defaultdict(list)
    by_tenant: dict[str, list[_Release]] = defaultdict(list)
    for rel in releases:
        by_tenant_flavor[rel[4], rel[5]].append(rel)
        by_tenant[rel[4]].append(rel)
    cohort_tenants: dict[str, list[str]] = defaultdict(list)
    for slug in list(led.tenants):
        cohort_tenants[led.cohort_of(slug)].append(slug)
    flavor_tenants: dict[str, set[str]] = defaultdict(set)
    for tenant_slug, flavor in by_tenant_flavor:
        flavor_tenants[flavor].add(tenant_slug)

    for pool, group in by_pool.items():
        kind = pool[0]
        rels: list[_Release]
        if kind == "d":
            out.update(_domain_etas(snap, led, admitted, pool[1], pool[2], group))
            continue
        if kind == "u":
            owner_releases = sorted(
                (rel[0], rel[1]) for rel in by_tenant[pool[1]] if rel[7] and str(rel[6]) == pool[2]
            )
            for w in group:
                out[w.key] = _user_eta(w.pending, led, owner_releases)
            continue
        if kind == "t":
            rels = by_tenant_flavor[pool[1], pool[2]]
        elif kind == "c":
            rels = [
                rel for slug in cohort_tenants[pool[1]] for rel in by_tenant_flavor[slug, pool[2]]
            ]
        elif kind == "f":
            rels = [
                rel for slug in flavor_tenants[pool[1]] for rel in by_tenant_flavor[slug, pool[1]]
            ]
        else:
            rels = by_tenant[pool[1]]
        queue = [
            (
                w.key,
                _amount(pool, w.pending.gpus, w.pending.cpu, w.pending.memory_gib),
                w.pending.ttl,
            )
            for w in group
        ]
        out.update(
            _simulate(
                snap.now,
                led.available(pool),
                ((rel[0], _amount(pool, rel[1], rel[2], rel[3])) for rel in rels),
                queue,
            )
        )
    return out


def _domain_etas(
    snap: Snapshot,
    led: Ledger,
    admitted: Sequence[Pending],
    flavor: str,
    level: str,
    group: Sequence[Wait],
) -> dict[WaitKey, datetime | None]:
    """When a domain of ``level`` first holds each waiting gang of ``group`` (in queue
    order) for good: its whole free nodes now, plus the nodes of gangs pinned to it as
    they end; each gang then takes its nodes there until its own TTL ends."""
    room = led.domains.get(flavor)
    if room is None or level not in room.levels:
        return {w.key: None for w in group}
    free = room.per_domain(room.levels.index(level))
    events: dict[str, list[tuple[datetime, int]]] = defaultdict(list)
    for r in snap.running:
        if (
            r.flavor == flavor
            and r.topology_level == level
            and r.topology_domain
            and r.expires_at is not None
        ):
            events[r.topology_domain].append((r.expires_at, r.nodes))
    for p in admitted:
        domain = led.pinned.get(p.id)
        if domain and placement_level(p, room.levels) == level and p.ttl is not None:
            events[domain].append((snap.now + p.ttl, p.workers))
    out: dict[WaitKey, datetime | None] = {}
    for w in group:
        need = w.pending.workers
        found = sorted(
            (when, domain)
            for domain in set(free) | set(events)
            if (when := _first_holding(snap.now, free[domain], events[domain], need))
        )
        if not found:
            out[w.key] = None
            continue
        when, domain = found[0]
        out[w.key] = when
        events[domain].append((when, -need))
        if w.pending.ttl is not None:
            events[domain].append((when + w.pending.ttl, need))
    return out


def _first_holding(
    now: datetime, free: int, events: list[tuple[datetime, int]], need: int
) -> datetime | None:
    """The first moment from which a domain with ``free`` nodes now and ``events``
    (when, nodes freed or, negative, taken) keeps at least ``need`` free for good."""
    times = sorted({now, *(when for when, _ in events if when > now)})
    changes: Counter[datetime] = Counter()
    for when, nodes in events:
        changes[max(when, now)] += nodes
    level, levels = free, []
    for t in times:
        level += changes[t]
        levels.append(level)
    lowest = None
    first = None
    for t, level in zip(reversed(times), reversed(levels), strict=True):
        lowest = level if lowest is None else min(lowest, level)
        if lowest < need:
            break
        first = t
    return first


def format_eta(eta: datetime | None, now: datetime) -> str:
    """An ETA in plain words: ``now``, ``about 40 min``, ``about 2 h``, ``unknown``."""
    if eta is None:
        return "unknown"
    seconds = (eta - now).total_seconds()
    if seconds < 60:
        return "now" if seconds <= 0 else "in less than a minute"
    minutes = math.ceil(seconds / 60)
    if minutes < 10:
        return f"about {minutes} min"
    if minutes < 90:
        return f"about {5 * round(minutes / 5)} min"
    hours = minutes / 60
    if hours < 48:
        return f"about {round(hours)} h"
    return f"about {round(hours / 24)} days"
