"""The dry-run without a whole pass per verdict: one recorded pass, forked where it matters.

:class:`RecordedPass` runs the pass over the waiting queue once, keeping each step's heap
key and a checkpoint every ``every`` steps. A candidate is judged by finding the step at
which the pass would reach it, forking the checkpoint before it and replaying at most
``every`` steps with the pass's own code. Where the rest of the pass could change (caps
of the owner's later requests, aging, earmarks, a reclaim memo a later step reads),
:meth:`RecordedPass.judge` returns ``None`` and the caller runs the whole pass, so a
verdict is always the whole pass's (``tests/clusters/admission/test_recorded_pass.py``).
"""

from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict
from datetime import datetime
from math import isqrt

from clusters.admission.decide import PassState
from clusters.admission.eta import Wait, estimate
from clusters.admission.ledger import Pool
from clusters.admission.queue_order import HeadKey, TenantOrder, head_key, tenant_order
from clusters.admission.snapshot import (
    DEV,
    FITS_NOW,
    NEVER_FITS,
    RECLAIM_PENDING,
    WILL_QUEUE,
    Decision,
    Pending,
    Snapshot,
    Verdict,
    VerdictReason,
)


class RecordedPass:
    """One admission pass over ``snapshot``, recorded so that verdicts fork from it.

    Recording costs one pass plus a copy of its counters per checkpoint (copy on write
    for the per-owner counts); a verdict costs a scan of the recorded heap keys, at most
    ``every`` replayed steps and an ETA over the candidate's pool.
    """

    def __init__(self, snapshot: Snapshot, every: int | None = None) -> None:
        self.snap = snapshot
        # Checkpoints every sqrt(n) steps balance their cost against the replay's.
        self.every = every or max(32, isqrt(len(snapshot.pending)))
        self.keys: list[HeadKey] = []
        self.items: list[Pending] = []
        self.step_of: dict[int, int] = {}
        self.share_after: list[float] = []
        self.checkpoints: list[PassState] = []
        self.wait_steps_by_tenant: dict[str, list[int]] = defaultdict(list)
        self.wait_steps_by_flavor: dict[str, list[int]] = defaultdict(list)
        self.waits_by_pool: dict[Pool, list[tuple[int, Wait]]] = defaultdict(list)
        # The pool each request waited on (absent: admitted), and the last step that
        # asked each (cohort, flavor) for a reclaim.
        self.pool_of: dict[int, Pool] = {}
        self.last_reclaim: dict[tuple[str, str], int] = {}
        self._asked: dict[tuple[str, str], int] = {}
        state = PassState(snapshot)
        self.aged_before = state.aged_before
        self.initial_share = dict(state.led.share)
        # Each tenant's queue in its own order, as the pass sorts it.
        self.tenant_orders: dict[str, list[TenantOrder]] = {}
        self.tenant_ids: dict[str, list[int]] = {}
        by_tenant: dict[str, list[Pending]] = defaultdict(list)
        for p in snapshot.pending:
            by_tenant[p.tenant].append(p)
        for slug, queue in by_tenant.items():
            ordered = sorted((self.tenant_order(p), p.id) for p in queue)
            self.tenant_orders[slug] = [o for o, _ in ordered]
            self.tenant_ids[slug] = [pid for _, pid in ordered]
        self.final = state
        self.admitted: list[Pending] = []
        self.decision: Decision = state.run(self)

    # -- the recorder (PassWatcher) ---------------------------------------------------

    def before_step(self, state: PassState) -> None:
        """Keep a checkpoint every ``every`` steps."""
        if len(self.keys) % self.every == 0:
            self.checkpoints.append(state.fork())

    def after_step(
        self, state: PassState, key: HeadKey, p: Pending, outcome: tuple[str, str, Pool] | None
    ) -> None:
        """Record the step's heap key, request, its tenant's share after it and where it
        waits."""
        step = len(self.keys)
        self.keys.append(key)
        self.items.append(p)
        self.step_of[p.id] = step
        self.share_after.append(state.led.share[p.tenant])
        for ckey, asked in state.reclaim_asked.items():
            if self._asked.get(ckey) != asked:
                self._asked[ckey] = asked
                self.last_reclaim[ckey] = step
        if outcome is not None:
            self.wait_steps_by_tenant[p.tenant].append(step)
            self.pool_of[p.id] = outcome[2]
            # A request that accepts several flavors waits on each of them.
            for option, (reason, _, pool) in state.fungible.get(p.id, [(p, outcome)]):
                self.wait_steps_by_flavor[option.flavor].append(step)
                self.waits_by_pool[pool].append((step, Wait(option, reason, pool)))

    def finished(self, state: PassState, admitted: list[Pending], waits: list[Wait]) -> None:
        """Keep the final state: the ETA of a waiting candidate is estimated against it."""
        self.final = state
        self.admitted = admitted

    def tenant_order(self, p: Pending) -> TenantOrder:
        """``p``'s place in its tenant's queue, as the pass sorts it."""
        return tenant_order(p, self.aged_before, self.snap.recent.owner_use(p.tenant, p.owner))

    # -- verdicts -----------------------------------------------------------------------

    def entry_step(self, candidate: Pending) -> int:
        """The step at which the pass, with ``candidate`` queued too, would reach it."""
        slug = candidate.tenant
        orders = self.tenant_orders.get(slug, [])
        index = bisect_left(orders, self.tenant_order(candidate))
        if index == 0:
            # The head of its tenant's queue: in the heap from the start.
            start, share = 0, self.initial_share.get(slug, 0.0)
        else:
            # It enters the heap once the request before it in its tenant's queue has
            # been decided, with the tenant's share as that step left it.
            before = self.step_of[self.tenant_ids[slug][index - 1]]
            start, share = before + 1, self.share_after[before]
        key = head_key(candidate, self.aged_before, share)
        # It is popped at the first step whose head sorts after it (the heads of other
        # tenants are what the recorded pass popped; its own tenant's next request sorts
        # after it and enters only once it is popped).
        keys = self.keys
        step = start
        while step < len(keys) and not key < keys[step]:
            step += 1
        return step

    def judge(self, candidate: Pending) -> Verdict | None:
        """The whole pass's verdict on ``candidate``, or ``None`` when only a whole pass
        can tell (see the module's docstring)."""
        final = self.final
        never = final.led.never_fits(candidate)
        if never:
            return Verdict(NEVER_FITS, [VerdictReason(code, message) for code, message in never])
        if (
            candidate.id in self.step_of
            or candidate.fallbacks  # several flavors: the whole pass says which
            or candidate.earmarked
            or candidate.created_at <= self.aged_before
        ):
            return None
        tenant = final.led.tenant(candidate.tenant)
        capped = (
            tenant.max_dev_clusters_per_user is not None or tenant.max_dev_gpus_per_user is not None
        )
        if candidate.kind == DEV and capped:
            # The owner's requests behind it count it against their caps. That changes
            # nothing only if each of them waited, over its cap or never fitting, anyway
            # (counting one more keeps it over its cap, in the same pool).
            for later in final.led.queued_behind(candidate):
                pool = self.pool_of.get(later.id)
                if pool is None or pool[0] not in ("u", "never"):
                    return None
        step = self.entry_step(candidate)
        base = min(step // self.every, len(self.checkpoints) - 1) if self.checkpoints else -1
        if base < 0:
            state = PassState(self.snap)  # nothing queued: the candidate is the first step
            replay_from = 0
        else:
            state = self.checkpoints[base].fork()
            replay_from = base * self.every
        for p in self.items[replay_from:step]:
            state.step(p)
        failed_before = dict(state.reclaim_failed)
        outcome = state.step(candidate)
        if outcome is None:
            member, note = state.placements.get(candidate.id, (None, ""))
            return Verdict(FITS_NOW, flavor=candidate.flavor, kube_cluster=member, placement=note)
        reason, message, pool = outcome
        position = bisect_left(self.wait_steps_by_tenant.get(candidate.tenant, []), step) + 1
        flavor_position = bisect_left(self.wait_steps_by_flavor.get(candidate.flavor, []), step)
        eta: datetime | None
        if reason == RECLAIM_PENDING:
            # Its ETA is when what is reclaimed for it is freed, fixed at its own step.
            eta = state.reclaim_etas.get(candidate.id, self.snap.now + self.snap.reclaim_grace)
        elif candidate.id in state.promises.holders or any(
            # A reclaim that failed for it is remembered; only a later request asking the
            # same (cohort, flavor) to reclaim reads that memo.
            self.last_reclaim.get(ckey, -1) >= step
            for ckey, failed in state.reclaim_failed.items()
            if failed_before.get(ckey) != failed
        ):
            return None  # it changed what later steps decide
        elif pool[0] == "never":
            eta = None
        else:
            ahead = [w for s, w in self.waits_by_pool.get(pool, []) if s < step]
            etas = estimate(
                self.snap,
                final.led,
                self.admitted,
                [*ahead, Wait(candidate, reason, pool)],
                final.picked,
                final.reclaim_etas,
                {**final.protected_etas, **state.protected_etas},
            )
            eta = etas.get((candidate.id, candidate.flavor))
        return Verdict(
            WILL_QUEUE,
            [VerdictReason(reason, message)],
            position=position,
            flavor_position=flavor_position + 1,
            eta=eta,
        )
