"""One admission pass: which queued requests start now, and why the others wait.

Order (DESIGN "Data flow", step 3): priority class and explicit priority; then requests
aged past ``Snapshot.aging``; then the tenant's weighted dominant share; then age. A heap
holds one head per tenant, so a pass costs O(n log n + n log T). A request that does not
fit is skipped; once aged it *holds* the pool that blocks it, so it starts at the latest
when what is ahead of it has started (``tests/clusters/admission/test_properties.py``).
A request that reclaimed capacity is promised what it frees
(:mod:`clusters.admission.reclaim_promises`). A gang is charged whole, or not at all.
"""

from __future__ import annotations

import copy
import heapq
from collections import defaultdict
from decimal import Decimal
from typing import Protocol

from clusters.admission.eta import Wait, estimate
from clusters.admission.ledger import Pool
from clusters.admission.pass_checks import PassChecks
from clusters.admission.queue_order import HeadKey, head_key, tenant_order
from clusters.admission.snapshot import (
    CAPACITY,
    COHORT_QUOTA,
    HEAD_OF_LINE,
    RECLAIM_PENDING,
    TENANT_QUOTA,
    Decision,
    Pending,
    Snapshot,
)
from clusters.admission.standing import queue_status

# A promised request that waits for one of these still waits for what the reclaim frees.
_STILL_PROMISED = (RECLAIM_PENDING, COHORT_QUOTA, CAPACITY, HEAD_OF_LINE)


class PassState(PassChecks):
    """One pass: the order requests are tried in, each step, and the decision; its state
    and checks are :class:`~clusters.admission.pass_checks.PassChecks`'."""

    def order(self) -> tuple[dict[str, list[Pending]], list[HeadKey]]:
        """Each tenant's queue, sorted, and the heap of their heads."""
        aged_before = self.aged_before
        recent = self.snap.recent
        queues: dict[str, list[Pending]] = defaultdict(list)
        for p in self.snap.pending:
            queues[p.tenant].append(p)
        heap: list[HeadKey] = []
        for queue in queues.values():
            queue.sort(
                key=lambda p: tenant_order(p, aged_before, recent.owner_use(p.tenant, p.owner))
            )
            heapq.heappush(heap, self.head_key(queue[0]))
        return queues, heap

    def step(self, p: Pending) -> tuple[str, str, Pool] | None:
        """Admit ``p`` if it may start now, else return why it waits (reason, message,
        pool), updating what it holds or is promised."""
        if p.fallbacks:
            return self._step_fungible(p)
        outcome = self.blocked(p)
        if outcome is None:
            outcome = self.held(p)
            if outcome is None:
                self._admit(p)
                return None
        self._waits(p, outcome)
        return outcome

    def _admit(self, p: Pending) -> None:
        member: str | None = None
        note = ""
        if self.placer.members:
            placement = self.placer.choose(p)
            member = placement.member  # always set, once blocked() let it through
            note = placement.note() if self.placer.explains else ""
        # The domain is chosen where the gang runs: on its member (a gang never spans
        # two), else on the flavor's nodes.
        domain = self.placer.domain_for(p, member) if member is not None else self.led.domain_for(p)
        self.led.charge(p)
        self.led.take_capacity(p, domain)
        self.placed[p.id] = p
        if member is not None:
            self.placer.take(p, member, domain)
            self.placements[p.id] = (member, note)
        if domain is not None:
            self.domains[p.id] = domain

    def _waits(self, p: Pending, outcome: tuple[str, str, Pool]) -> None:
        """``p`` waits for ``outcome``: keep what it is promised, and what it holds."""
        reason, _, pool = outcome
        if p.earmarked and reason in _STILL_PROMISED:
            self.promises.promise(p)  # still waiting for what was reclaimed for it
        promised = self.promises.holders.get(p.id) == p
        if pool[0] == "d":
            # No domain has room: what it holds is the flavor's whole free nodes.
            pool = ("f", p.flavor)
        if reason == RECLAIM_PENDING or (
            (p.created_at <= self.aged_before or promised)
            and reason in (TENANT_QUOTA, COHORT_QUOTA, CAPACITY)
        ):
            self.blocks.setdefault(pool, p)

    def _step_fungible(self, p: Pending) -> tuple[str, str, Pool] | None:
        """:meth:`step` for a request that accepts several flavors (Kueue's flavor
        fungibility): it is admitted on the first flavor, in its order, that fits now
        (quota with borrowing, capacity, caps), never on two. Only if none does may it
        ask for borrowed quota back, on the first flavor where that would make room
        (Kueue's ``whenCanPreempt: TryNextFlavor``). It then waits on every flavor; the
        outcome returned is its first preference's, and :attr:`fungible` keeps each."""
        options = p.options()
        outcomes: list[tuple[str, str, Pool]] = []
        for option in options:
            outcome = self.blocked(option, may_reclaim=False) or self.held(option)
            if outcome is None:
                self._admit(option)
                return None
            outcomes.append(outcome)
        for i, option in enumerate(options):
            outcome = self.blocked(option)
            if outcome is not None and outcome[0] == RECLAIM_PENDING:
                outcomes[i] = outcome
                break
            # Waiting for protection windows is not kept: it keeps its first outcome.
            self.protected_etas.pop((p.id, option.flavor), None)
        for option, outcome in zip(options, outcomes, strict=True):
            self._waits(option, outcome)
        self.fungible[p.id] = list(zip(options, outcomes, strict=True))
        return outcomes[0]

    def run(self, watch: PassWatcher | None = None) -> Decision:
        """The whole pass; ``watch`` (the dry-run's recorder) sees every step. Without
        :attr:`explain` the waiting requests get no status (positions, reasons, ETAs): the
        same admissions, reclaims and earmarks for a caller that reads nothing else."""
        snap = self.snap
        queues, heap = self.order()
        cursor: dict[str, int] = dict.fromkeys(queues, 0)
        waits: list[Wait] = []
        position: dict[str, int] = defaultdict(int)
        flavor_position: dict[str, int] = defaultdict(int)
        # (request, tenant position, [(option, flavor position, reason, message)])
        statuses: list[tuple[Pending, int, list[tuple[Pending, int, str, str]]]] = []
        admitted: list[Pending] = []
        while heap:
            if watch is not None:
                watch.before_step(self)
            key = heapq.heappop(heap)
            slug = key[-1]
            queue = queues[slug]
            p = queue[cursor[slug]]
            cursor[slug] += 1
            outcome = self.step(p)
            if outcome is None:
                admitted.append(self.placed[p.id])
            else:
                position[p.tenant] += 1
                standing = []
                for option, (reason, message, pool) in self.fungible.get(p.id, [(p, outcome)]):
                    flavor_position[option.flavor] += 1
                    standing.append((option, flavor_position[option.flavor], reason, message))
                    waits.append(Wait(option, reason, pool))
                statuses.append((p, position[p.tenant], standing))
            if watch is not None:
                watch.after_step(self, key, p, outcome)
            if cursor[slug] < len(queue):
                heapq.heappush(heap, self.head_key(queue[cursor[slug]]))
        decision = self.decision
        decision.admitted = [p.id for p in admitted]
        decision.placed = {p.id: p.flavor for p in admitted}
        for pid, (member, note) in self.placements.items():
            decision.clusters[pid] = member
            if note:
                decision.placement_notes[pid] = note
        decision.domains = dict(self.domains)
        if self.explain:
            etas = estimate(
                snap,
                self.led,
                admitted,
                waits,
                self.picked,
                self.reclaim_etas,
                self.protected_etas,
            )
            for p, pos, standing in statuses:
                decision.waiting[p.id] = queue_status(pos, standing, etas)
        decision.ledger = {key: gpus for key, gpus in self.led.usage.items() if gpus}
        decision.earmarked = list(self.promises.holders)
        if watch is not None:
            watch.finished(self, admitted, waits)
        return decision

    def fork(self) -> PassState:
        """A copy of the pass's state that can go on without changing this one (the
        dry-run's checkpoints). What only grows as a pure memo is shared."""
        other = copy.copy(self)
        other.led = self.led.fork()
        other.placer = self.placer.fork()
        other.placements = dict(self.placements)
        other.domains = dict(self.domains)
        other.blocks = dict(self.blocks)
        other.promises = self.promises.fork(other.led)
        other.reclaimed_from = defaultdict(Decimal, self.reclaimed_from)
        other.victims = dict(self.victims)
        other.picked = set(self.picked)
        other.placed = dict(self.placed)
        other.fungible = dict(self.fungible)
        other.reclaim_done = dict(self.reclaim_done)
        other.reclaim_etas = dict(self.reclaim_etas)
        other.reclaim_failed = dict(self.reclaim_failed)
        other.reclaim_asked = defaultdict(int, self.reclaim_asked)
        other.flavor_victims = dict(self.flavor_victims)
        other.protected_etas = dict(self.protected_etas)
        other.decision = Decision(reclaim=list(self.decision.reclaim))
        return other

    def head_key(self, p: Pending) -> HeadKey:
        """``p``'s place in the heap of tenant heads, given its tenant's share now."""
        return head_key(p, self.aged_before, self.led.share[p.tenant])


class PassWatcher(Protocol):
    """What sees every step of a pass (the dry-run's recorder)."""

    def before_step(self, state: PassState) -> None:
        """Called before each step, with the state it starts from."""

    def after_step(
        self,
        state: PassState,
        key: HeadKey,
        p: Pending,
        outcome: tuple[str, str, Pool] | None,
    ) -> None:
        """Called after each step: the heap key popped, the request, its outcome."""

    def finished(self, state: PassState, admitted: list[Pending], waits: list[Wait]) -> None:
        """Called once the pass has decided everything."""


def decide(snapshot: Snapshot, *, explain: bool = True) -> Decision:
    """One admission pass over ``snapshot``, which stays unchanged (pure)."""
    return PassState(snapshot, explain=explain).run()
