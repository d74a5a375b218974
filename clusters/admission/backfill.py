"""Backfill under a hold: who may pass a request that holds a pool, without delaying it.

A request that has waited past ``Snapshot.aging`` holds the pool that blocks it (its
tenant's quota ``t``, its cohort's unused quota ``c`` or its flavor's free capacity
``f``), so that smaller requests cannot keep passing it. Holding alone leaves GPUs idle
while the pool fills up. Backfilling (the EASY rule of batch schedulers) gives them out
without moving the holder's start. A request drawing from a held pool may start now if,
on every pool it shares with the holder:

* where the holder is short, the request is gone before the pool is sure to have room
  for the holder (its own TTL ends by then), or it takes no more than the pool then holds
  **spare** beyond the holder's need. "Sure to have room" counts only what is sure to
  end: clusters at their TTL (reclaim victims at the end of their grace), nothing for
  clusters without one;
* where the holder has room now, the request leaves it that room (it takes no more than
  is spare now, whatever its TTL): a request passing the hold on the flavor's capacity
  must not use up the holder's own tenant quota meanwhile, or the holder would be short
  of that when the capacity comes.

A pool the holder is short of without a sure time of room (what is sure to end never
makes room, or it is CPU or memory quota, which this does not model) lets nothing
through: the holder's start then hangs on clusters without an end, and a request passing
it could hold it back for as long as its own life. A request promised reclaimed GPUs is
not backfilled under (what is freed is its own). A production holder's flavor keeps no
spare (its reservation counts GPUs, not whole nodes, and a spare GPU on a node it needs
would keep the node from being whole).

The bound this keeps: the holder starts no later than it would have without any
backfill, as long as the clusters it counts on end at their TTL (an owner who extends a
backfilled cluster's TTL can move it by the extension).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from clusters.admission.ledger import Ledger, Pool
from clusters.admission.snapshot import PROD, Pending, Running

ZERO = Decimal(0)

# The pools a request may be backfilled under.
BACKFILLED_POOLS = ("t", "c", "f")


@dataclass
class Reservation:
    """A holder's reservation. For each pool it is short of: when that pool is sure to
    have room for it (``room``; ``None``: never, by what is sure to end) and what is
    spare there then, as later admissions take it (``spare``). For each pool it has room
    in now: what it needs there (``kept``), which nothing that passes it may take; the
    pool's free amount is read when asked, since requests that pass no hold draw from it
    too."""

    holder: Pending
    room: dict[Pool, datetime | None]
    spare: dict[Pool, Decimal]
    kept: dict[Pool, Decimal]

    def admits(
        self,
        now: datetime,
        p: Pending,
        draws: dict[Pool, Decimal],
        available: Callable[[Pool], Decimal],
    ) -> list[Pool] | None:
        """Whether ``p``, taking ``draws`` of each pool it draws from, may pass the holder
        (``available`` says what a pool has free now): the pools whose spare it takes
        (``None``: it may not pass)."""
        spends: list[Pool] = []
        for pool, taken in draws.items():
            if pool in self.kept:
                if available(pool) - taken < self.kept[pool]:
                    return None
                continue
            if pool not in self.room:
                continue  # not a pool the holder needs
            when = self.room[pool]
            if when is None:
                return None
            if p.ttl is not None and now + p.ttl <= when:
                continue  # gone before the holder can have the pool
            if taken > self.spare[pool]:
                return None
            spends.append(pool)
        return spends

    def take(self, pools: list[Pool], draws: dict[Pool, Decimal]) -> None:
        """A request admitted on the spare of ``pools`` takes it."""
        for pool in pools:
            self.spare[pool] -= draws[pool]

    def start(self, pool: Pool) -> datetime | None:
        """When ``pool`` is sure to have room for the holder (``None``: unknown)."""
        return self.room.get(pool)


def _in_pool(pool: Pool, led: Ledger, tenant: str, flavor: str) -> bool:
    kind = pool[0]
    if kind == "f":
        return flavor == pool[1]
    if kind == "t":
        return (tenant, flavor) == (pool[1], pool[2])
    return flavor == pool[2] and led.tenant(tenant).cohort == pool[1]


# (when, tenant, flavor, gpus): a release that is sure to come, in time order.
_End = tuple[datetime, str, str, Decimal]


def needs(led: Ledger, pools: Iterable[Pool], holder: Pending) -> dict[Pool, Decimal]:
    """What ``holder`` needs of each of ``pools``: what it draws, except on a cohort's
    pool its whole gang (its draw there grows as its tenant's own clusters end)."""
    out = draws(led, pools, holder)
    for pool in out:
        if pool[0] == "c":
            out[pool] = holder.gpus
    return out


def reserve(
    led: Ledger,
    holder: Pending,
    pools: dict[Pool, Decimal],
    short: Sequence[Pool],
    running: Iterable[Running],
    admitted: Iterable[Pending],
    reclaimed: dict[int, datetime],
) -> Reservation:
    """The reservation of ``holder``, which takes ``pools`` (pool -> its draw) and is
    ``short`` of some of them, given the ledger now, the clusters running before the
    pass, those ``admitted`` by it so far and the reclaim victims' suspension times
    (``reclaimed``)."""
    ends: list[_End] = []
    for r in running:
        end = r.expires_at
        if r.id in reclaimed:
            end = reclaimed[r.id] if end is None else min(end, reclaimed[r.id])
        if end is not None:
            ends.append((end, r.tenant, r.flavor, r.gpus))
    now = led.snap.now
    for p in admitted:
        if p.ttl is not None:
            ends.append((now + p.ttl, p.tenant, p.flavor, p.gpus))
    ends.sort(key=lambda e: e[0])
    room: dict[Pool, datetime | None] = {}
    spare: dict[Pool, Decimal] = {}
    kept: dict[Pool, Decimal] = {}
    for pool, need in pools.items():
        whole_nodes = holder.kind == PROD and pool[0] == "f"
        if pool not in short:
            # A production holder's whole nodes: any GPU taken may break one.
            kept[pool] = Decimal("Infinity") if whole_nodes else need
            continue
        when = _room(led, pool, need, ends) if pool[0] in BACKFILLED_POOLS else None
        room[pool] = when
        if when is None or whole_nodes:
            spare[pool] = ZERO
        else:
            spare[pool] = max(_available_at(led, pool, ends, when) - need, ZERO)
    return Reservation(holder, room, spare, kept)


def _releases_of(
    led: Ledger, pool: Pool, ends: Sequence[_End]
) -> Iterator[tuple[datetime, Decimal]]:
    """What each release gives back to ``pool``, in time order."""
    released: dict[str, Decimal] = defaultdict(Decimal)
    for when, tenant, flavor, gpus in ends:
        if _in_pool(pool, led, tenant, flavor):
            yield when, _freed(led, pool, tenant, gpus, released)


def _room(led: Ledger, pool: Pool, need: Decimal, ends: Sequence[_End]) -> datetime | None:
    """When ``pool`` is sure to have ``need`` free (``None``: never, by what is sure to
    end)."""
    available = led.available(pool)
    if available >= need:
        return led.snap.now
    for when, freed in _releases_of(led, pool, ends):
        available += freed
        if available >= need:
            return when
    return None


def _available_at(led: Ledger, pool: Pool, ends: Sequence[_End], at: datetime) -> Decimal:
    """What ``pool`` holds at ``at``, by what is sure to end until then."""
    available = led.available(pool)
    for when, freed in _releases_of(led, pool, ends):
        if when > at:
            break
        available += freed
    return available


def _freed(
    led: Ledger, pool: Pool, tenant: str, gpus: Decimal, released: dict[str, Decimal]
) -> Decimal:
    """What a release of ``gpus`` of ``tenant`` gives back to ``pool``: all of it, except
    on a cohort's pool, which gets back only what the tenant used beyond what it keeps
    (``released`` is what the walk has already given back per tenant)."""
    if pool[0] != "c":
        return gpus
    kept = led.guaranteed.get((tenant, pool[2]), 0)
    used = led.usage[tenant, pool[2]] - released[tenant]
    released[tenant] += gpus
    return max(used - kept, ZERO) - max(used - gpus - kept, ZERO)


def draws(led: Ledger, pools: Iterable[Pool], p: Pending) -> dict[Pool, Decimal]:
    """What admitting ``p`` takes from each of ``pools`` (those it draws from)."""
    out: dict[Pool, Decimal] = {}
    for pool in pools:
        kind = pool[0]
        if kind == "c":
            out[pool] = led.pool_draw(p.tenant, p.flavor, p.gpus)
        elif kind == "tcpu":
            out[pool] = p.cpu
        elif kind == "tmem":
            out[pool] = p.memory_gib
        else:
            out[pool] = p.gpus
    return out
