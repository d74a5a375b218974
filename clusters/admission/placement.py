"""Placement: the one member of the fleet an admitted gang runs on, and why not elsewhere.

Among the members the tenant may use (allow-list), that are active (not cordoned or
draining) and reachable, that have the flavor and are the cluster or in the region the
request asked for, the first in placement order with room for the whole gang within its
tenant's cap there (if the admin capped it) and, for a gang that requires a topology
level, in one domain of it there; a gang is never split. A resumed request
goes back to the member it last ran on when that one qualifies. What a placement takes
is not offered again in the same pass. Pure.
"""

from __future__ import annotations

import copy
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal

from clusters.admission.counts_in_words import count, number
from clusters.admission.snapshot import PROD, FlavorQ, MemberQ, Pending, Running
from clusters.admission.topology_room import (
    REQUIRED,
    FreeNodes,
    best_domain,
    level_word,
    take_nodes,
    wish,
)

# Where a reason that is not read after the member's name puts it.
MEMBER = "{member}"


@dataclass(frozen=True)
class Placement:
    """Where a request would run (``member``; ``None``: nowhere now) and why each member
    before it, or every member it may not use, is passed over (``passed``: (name, why),
    ``why`` read after the name: "is full", "is cordoned", unless it holds ``MEMBER``)."""

    member: str | None
    passed: tuple[tuple[str, str], ...] = ()
    # Whether some member it may use has the flavor, and only room is missing.
    room_only: bool = False

    def reasons(self) -> str:
        """``onprem is full; cloud is not open to acme``; a ``why`` that names the member
        itself (``acme may hold at most 8 h100 GPUs on cloud``) is read as it is."""
        return "; ".join(
            why.replace(MEMBER, name) if MEMBER in why else f"{name} {why}"
            for name, why in self.passed
        )

    def note(self) -> str:
        """Where it runs for a person: ``cloud-l4 (onprem is full)``."""
        if self.member is None:
            return ""
        return f"{self.member} ({self.reasons()})" if self.passed else self.member

    def waiting_words(self, p: Pending) -> str:
        """Why it waits although quota and the fleet's totals have room."""
        what = "room for the whole gang" if self.room_only else f"{p.flavor} nodes for it"
        return f"No cluster it may use has {what} now ({self.reasons()})."


class Placer:
    """The members in placement order and what each has free per flavor, for one pass."""

    def __init__(
        self,
        members: Sequence[MemberQ],
        flavors: Mapping[str, FlavorQ],
        running: Iterable[Running] = (),
    ) -> None:
        self.members = sorted(members, key=lambda m: (m.order, m.name))
        self.flavors = flavors
        self.free: dict[tuple[str, str], Decimal | None] = {}
        self.free_nodes: dict[tuple[str, str], int | None] = {}
        # Whole free nodes per topology domain, member by member (a gang never spans two).
        self.domains: dict[tuple[str, str], FreeNodes] = {}
        for m in self.members:
            for flavor, stock in m.stock.items():
                self.free[m.name, flavor] = stock.free_gpus
                self.free_nodes[m.name, flavor] = stock.free_nodes
                known = flavors.get(flavor)
                if stock.free_node_domains is not None and known is not None:
                    room = FreeNodes(known.topology, stock.free_node_domains)
                    if stock.free_nodes is not None:
                        room.shrink_to(stock.free_nodes)
                    self.domains[m.name, flavor] = room
        # What each tenant holds per (member, tenant, flavor), for the members' caps.
        self.held: dict[tuple[str, str, str], Decimal] = defaultdict(Decimal)
        if any(m.caps for m in self.members):
            for r in running:
                if r.cluster:
                    self.held[r.cluster, r.tenant, r.flavor] += r.gpus

    def fork(self) -> Placer:
        """A copy whose free counters change apart from this one's."""
        other = copy.copy(self)
        other.free = dict(self.free)
        other.free_nodes = dict(self.free_nodes)
        other.domains = {key: room.fork() for key, room in self.domains.items()}
        other.held = defaultdict(Decimal, self.held)
        return other

    @property
    def explains(self) -> bool:
        """Whether the words name members (a fleet of one keeps the words of one cluster)."""
        return len(self.members) > 1

    def choose(self, p: Pending) -> Placement:
        """Where ``p`` would run now, and why not on the members passed over."""
        passed: list[tuple[str, str]] = []
        room_only = False
        candidates = self.members
        if p.was_on:
            # A resumed request tries the member it last ran on first.
            candidates = sorted(candidates, key=lambda m: m.name != p.was_on)
        for m in candidates:
            why = self._unusable(m, p)
            if why is None:
                why = self._over_cap(m, p) or self._no_room(m, p)
                if why is None:
                    return Placement(m.name, tuple(passed))
                room_only = True
            if why:
                passed.append((m.name, why))
        return Placement(None, tuple(passed), room_only)

    def _over_cap(self, m: MemberQ, p: Pending) -> str | None:
        """Why ``p`` would take its tenant over its cap on ``m`` (``None``: it would not,
        or there is no cap there)."""
        cap = m.caps.get((p.tenant, p.flavor))
        if cap is None:
            return None
        held = self.held[m.name, p.tenant, p.flavor]
        if held + p.gpus <= cap:
            return None
        words = f"{p.tenant} may hold at most {count(cap, f'{p.flavor} GPU')} on {MEMBER}"
        return f"{words} and holds {number(held)} there" if held else words

    def _unusable(self, m: MemberQ, p: Pending) -> str | None:
        """Why ``p`` may not run on ``m`` whatever is free there ("" to leave ``m`` out
        of the words: not the cluster it asked for)."""
        if p.wanted_cluster and m.name != p.wanted_cluster:
            return ""
        if p.wanted_region and m.region != p.wanted_region:
            return f"is not in region {p.wanted_region}"
        if m.tenants and p.tenant not in m.tenants:
            return f"is not open to {p.tenant}"
        if not m.active:
            return f"is {m.schedulable}"
        if not m.reachable:
            return "is unreachable"
        stock = m.stock.get(p.flavor)
        if stock is None or not stock.node_count:
            return f"has no {p.flavor} nodes"
        if p.kind == PROD and p.workers > stock.node_count:
            return f"has {count(stock.node_count, f'{p.flavor} node')}, {p.workers} needed"
        return None

    def _no_room(self, m: MemberQ, p: Pending) -> str | None:
        """Why the whole gang does not fit in what ``m`` has free now (``None``: it does)."""
        free = self.free.get((m.name, p.flavor))
        if free is None or p.booked == p.flavor:
            return None  # unknown, or nodes are being added for it: not checked
        if p.gpus > free:
            if free <= 0:
                return "is full"
            return f"has {count(free, f'{p.flavor} GPU')} free, {count(p.gpus, 'GPU')} needed"
        nodes = self.whole_free_nodes(m.name, p.flavor)
        if p.kind == PROD and nodes is not None and p.workers > nodes:
            if nodes <= 0:
                return "is full"
            return f"has {count(nodes, f'whole {p.flavor} node')} free, {p.workers} needed"
        return self._no_domain(m, p)

    def _no_domain(self, m: MemberQ, p: Pending) -> str | None:
        """Why no domain of the level ``p`` requires on ``m`` holds all its workers."""
        asked = wish(p)
        room = self.domains.get((m.name, p.flavor))
        if asked is None or asked[1] != REQUIRED or room is None:
            return None
        fit = room.fit(asked[0], p.workers)
        if fit is None or fit.domain is not None:
            return None
        word = level_word(asked[0])
        return (
            f"has no {word} with {count(p.workers, f'whole free {p.flavor} node')} "
            f"(the emptiest {word} has {number(fit.most)} free)"
        )

    def domain_for(self, p: Pending, member: str) -> str | None:
        """The best-fitting domain on ``member`` for ``p``'s topology wish (``None``: it
        asks for none, none fits there, or none is known there)."""
        return best_domain(self.domains.get((member, p.flavor)), p)

    def whole_free_nodes(self, member: str, flavor: str) -> int | None:
        """Nodes of ``flavor`` on ``member`` with every GPU free (estimated from free GPUs
        when unknown)."""
        nodes = self.free_nodes.get((member, flavor))
        if nodes is not None:
            return nodes
        free = self.free.get((member, flavor))
        if free is None:
            return None
        return int(free // self.flavors[flavor].gpus_per_node)

    def take(self, p: Pending, member: str, domain: str | None = None) -> None:
        """Subtract ``p`` from what ``member`` has free (as the ledger does for the
        fleet: never below nothing for a gang whose nodes are being added), in
        ``domain`` for a gang pinned to one."""
        self.held[member, p.tenant, p.flavor] += p.gpus
        key = (member, p.flavor)
        free = self.free.get(key)
        if free is None:
            return
        free -= p.gpus
        if p.booked == p.flavor:
            free = max(free, Decimal(0))
        self.free[key] = free
        nodes = self.free_nodes.get(key)
        if nodes is not None:
            if p.kind == PROD:
                nodes -= p.workers
            per_node = self.flavors[p.flavor].gpus_per_node
            self.free_nodes[key] = max(min(nodes, int(free // per_node)), 0)
        room = self.domains.get(key)
        if room is not None:
            take_nodes(room, p, domain, self.whole_free_nodes(member, p.flavor))
