"""What one admission pass has promised to the requests that quota is reclaimed for.

When a request within its nominal quota finds its cohort full of borrowers, the pass
suspends borrowers for it; what they free is *promised* to it until it is admitted, and
no request reached later may take it unless enough is left for every promise. The mark
outlives the pass (``Pending.earmarked``), so what was reclaimed for a request is never
handed to one of the same or a lower priority. Pure; every check is O(1).
"""

from __future__ import annotations

from collections import defaultdict
from decimal import Decimal

from clusters.admission.ledger import Ledger, Pool
from clusters.admission.snapshot import Pending

ZERO = Decimal(0)


class Promises:
    """GPUs promised per cohort, fleet flavor and tenant, and what reclaims will free."""

    def __init__(self, led: Ledger) -> None:
        self.led = led
        self.cohort: dict[tuple[str, str], Decimal] = defaultdict(Decimal)
        self.fleet: dict[str, Decimal] = defaultdict(Decimal)
        self.tenant: dict[tuple[str, str], Decimal] = defaultdict(Decimal)
        self.releasing_cohort: dict[tuple[str, str], Decimal] = defaultdict(Decimal)
        self.releasing_fleet: dict[str, Decimal] = defaultdict(Decimal)
        self.holders: dict[int, Pending] = {}  # in promise order

    def fork(self, led: Ledger) -> Promises:
        """A copy over ``led`` (a fork of this one's ledger) that changes apart."""
        other = Promises(led)
        other.cohort.update(self.cohort)
        other.fleet.update(self.fleet)
        other.tenant.update(self.tenant)
        other.releasing_cohort.update(self.releasing_cohort)
        other.releasing_fleet.update(self.releasing_fleet)
        other.holders = dict(self.holders)
        return other

    def _ckey(self, p: Pending) -> tuple[str, str]:
        return (self.led.cohort_of(p.tenant), p.flavor)

    def promise(self, p: Pending) -> None:
        """Reserve ``p``'s GPUs in its cohort, on the fleet and in its tenant's quota."""
        if p.id in self.holders:
            return
        self.holders[p.id] = p
        self.cohort[self._ckey(p)] += p.gpus
        self.fleet[p.flavor] += p.gpus
        self.tenant[p.tenant, p.flavor] += p.gpus

    def freeing(self, ckey: tuple[str, str], gpus: Decimal) -> None:
        """Borrowers' clusters holding ``gpus`` of ``ckey`` are being suspended."""
        self.releasing_cohort[ckey] += gpus
        self.releasing_fleet[ckey[1]] += gpus

    def _own(self, p: Pending) -> Decimal:
        # A request that accepts several flavors is promised GPUs of one of them only.
        held = self.holders.get(p.id)
        return held.gpus if held is not None and held.flavor == p.flavor else ZERO

    def cohort_for(self, p: Pending) -> Decimal:
        """GPUs of ``p``'s cohort promised to others, which ``p`` may not take."""
        return self.cohort[self._ckey(p)] - self._own(p)

    def fleet_for(self, p: Pending) -> Decimal:
        """GPUs of ``p``'s flavor on the fleet promised to others."""
        return self.fleet[p.flavor] - self._own(p)

    def tenant_for(self, p: Pending) -> Decimal:
        """GPUs of ``p``'s tenant quota promised to its other requests."""
        return self.tenant[p.tenant, p.flavor] - self._own(p)

    def holder(self, p: Pending, pool: Pool) -> Pending | None:
        """The first request promised GPUs of ``pool`` that ``p`` would take."""
        for h in self.holders.values():
            if h.id == p.id or h.flavor != p.flavor:
                continue
            if pool[0] == "f":
                return h
            if pool[0] == "t" and h.tenant == p.tenant:
                return h
            if pool[0] == "c" and self._ckey(h) == self._ckey(p):
                return h
        return None
