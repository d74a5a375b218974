"""Priority preemption: a waiting request of a class that may preempt takes running
requests of strictly lower classes off their GPUs (docs/preemption.md).

It is asked only once the request is within its own tenant's quota plus borrowing
limit (a class never lets a tenant hold more than its quota allows), has no request
ahead holding what it needs, and does not fit for its cohort's quota or for the fleet's
capacity; a reclaim of borrowed quota, if its tenant is within its nominal quota, is
tried first. Victims are running requests of any tenant on the same flavor (for cohort
quota: of the same cohort tree, since only they give the cohort's GPUs back), of a class
strictly lower than the request's, whose kind may be stopped, outside their protection
windows, never a running request's surge or growth (their class is not read); the
lowest class first, then the lowest priority, then the newest. Those warned by an
earlier pass go first, so that one preemption's notice is not moved to another request.
They are warned through :class:`~clusters.admission.snapshot.Reclaim` (``cause``
"priority"), as a reclaim's are. Pure.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Protocol

from clusters.admission.ledger import Pool
from clusters.admission.snapshot import CAPACITY, COHORT_QUOTA, PROD, RECLAIM_PENDING, Running
from clusters.admission.victims import may_be_stopped, pick, victim_order
from clusters.admission.wait_messages import preempted_message, preempting_message

if TYPE_CHECKING:
    from datetime import datetime

    from clusters.admission.ledger import Ledger
    from clusters.admission.reclaim_promises import Promises
    from clusters.admission.snapshot import Pending, Snapshot
    from clusters.admission.victims import Pick

ZERO = Decimal(0)
Outcome = tuple[str, str, Pool]


class PassState(Protocol):
    """What preemption reads and writes of the pass (``pass_checks.PassChecks``, which imports
    this module: a protocol here keeps the two out of an import cycle)."""

    snap: Snapshot
    explain: bool
    led: Ledger
    promises: Promises
    reclaimed_from: dict[tuple[str, str], Decimal]
    picked: set[int]
    flavor_victims: dict[str, list[Running]]

    def held(self, p: Pending) -> Outcome | None: ...

    def protected(self, p: Pending, reason: str, pool: Pool, lead: str, found: Pick) -> Outcome: ...

    def warn(
        self,
        p: Pending,
        chosen: list[Running],
        *,
        cause: str,
        key: tuple[str, str],
        told: Callable[[Running, timedelta], str],
    ) -> tuple[datetime, timedelta]: ...


def candidates(state: PassState, flavor: str) -> list[Running]:
    """The running requests of ``flavor`` a preemption may ever choose, in the order it
    chooses them (computed once per pass and flavor)."""
    found = state.flavor_victims.get(flavor)
    if found is None:
        found = [
            r for r in state.snap.running if r.flavor == flavor and r.id > 0 and may_be_stopped(r)
        ]
        found.sort(key=lambda r: (r.suspend_at is None, *victim_order(r)))
        state.flavor_victims[flavor] = found
    return found


def preempt_for_cohort(state: PassState, p: Pending, ckey: tuple[str, str]) -> Outcome | None:
    """Preempt lower classes of ``p``'s cohort tree so that its cohort's quota holds it;
    ``None`` when they hold too little (protected ones included)."""
    led, promises = state.led, state.promises
    deficit = (
        led.cohort_usage[ckey]
        + promises.cohort_for(p)
        + led.pool_draw(p.tenant, p.flavor, p.gpus)
        - led.cohort_nominal.get(ckey, 0)
        - promises.releasing_cohort[ckey]
    )
    if deficit <= 0:
        return None

    def frees(r: Running, taken: Decimal) -> Decimal:
        # What stopping ``r`` gives back to the cohort's pool: its tenant's use beyond
        # what it keeps for itself (lending limits), less what is taken from it already.
        kept = led.guaranteed.get((r.tenant, r.flavor), 0)
        beyond = led.usage[r.tenant, r.flavor] - state.reclaimed_from[r.tenant, r.flavor]
        return min(r.gpus, max(beyond - taken - kept, ZERO))

    chosen = (
        r
        for r in candidates(state, p.flavor)
        if r.class_value < p.class_value
        and r.id not in state.picked
        and led.cohort_of(r.tenant) == ckey[0]
    )
    return _take(state, p, chosen, deficit, ("c", *ckey), COHORT_QUOTA, frees)


def preempt_for_capacity(state: PassState, p: Pending) -> Outcome | None:
    """Preempt lower classes on ``p``'s flavor, whatever their cohort, so that the fleet
    has room for it; ``None`` when they hold too little. A production gang's whole
    nodes are counted as GPUs (a node's worth per missing node): an estimate, since
    stopping a dev request frees a whole node only if nothing else runs there."""
    led, promises = state.led, state.promises
    if state.held(p) is not None:
        return None
    free = led.free.get(p.flavor) or ZERO
    deficit = p.gpus + promises.fleet_for(p) - free - promises.releasing_fleet[p.flavor]
    nodes = led.whole_free_nodes(p.flavor)
    flavor = led.flavors.get(p.flavor)
    if p.kind == PROD and nodes is not None and flavor is not None and p.workers > nodes:
        deficit = max(deficit, Decimal((p.workers - nodes) * flavor.gpus_per_node))
    if deficit <= 0:
        return None
    chosen = (
        r
        for r in candidates(state, p.flavor)
        if r.class_value < p.class_value and r.id not in state.picked
    )
    return _take(state, p, chosen, deficit, ("f", p.flavor), CAPACITY, None)


def _take(
    state: PassState,
    p: Pending,
    chosen: Iterable[Running],
    deficit: Decimal,
    pool: Pool,
    reason: str,
    frees: Callable[[Running, Decimal], Decimal] | None,
) -> Outcome | None:
    """Warn enough of ``chosen`` for ``p`` (it then waits for them: ``RECLAIM_PENDING``),
    or say it waits for their protection windows (``reason`` kept), or ``None``."""
    found = pick(chosen, deficit, now=state.snap.now, grace=state.snap.reclaim_grace, amount=frees)
    if not found.enough:
        if found.waits_for is None:
            return None
        return state.protected(p, reason, pool, "Preempts", found)
    key = ("priority", p.flavor)
    _, notice = state.warn(
        p,
        found.chosen,
        cause="priority",
        key=key,
        told=lambda r, notice: preempted_message(r, p, notice),
    )
    return (RECLAIM_PENDING, _said(state, p, notice), pool)


def _said(state: PassState, p: Pending, notice: timedelta) -> str:
    return preempting_message(p, notice) if state.explain else ""
