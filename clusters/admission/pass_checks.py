"""The state of one admission pass and its checks: whether a request may start now
(quotas, caps, capacity, topology, what an aged request holds), and the reclaim and
priority preemption that make room for it. :mod:`clusters.admission.decide` runs the
pass over them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from datetime import datetime, timedelta
from decimal import Decimal

from clusters.admission.domain_reclaim import free_a_domain
from clusters.admission.eta import WaitKey
from clusters.admission.ledger import Ledger, Pool, fmt
from clusters.admission.placement import Placer
from clusters.admission.priority_preemption import preempt_for_capacity, preempt_for_cohort
from clusters.admission.reclaim_promises import Promises
from clusters.admission.snapshot import (
    CAPACITY,
    COHORT_QUOTA,
    FLAVOR_UNKNOWN,
    HEAD_OF_LINE,
    NODE_SIZE,
    PROD,
    RECLAIM_PENDING,
    TENANT_QUOTA,
    USER_CAP,
    Decision,
    Pending,
    Reclaim,
    Running,
    Snapshot,
    extra_of,
)
from clusters.admission.topology_room import REQUIRED, FreeNodes, level_word, wish
from clusters.admission.victims import Pick, may_be_stopped, pick, victim_order
from clusters.admission.wait_messages import (
    cap_message,
    cohort_message,
    domain_message,
    domain_reclaim_message,
    free_words,
    minutes_words,
    promised_message,
    protected_message,
    quota_message,
)

# A request that can never fit still sits in the queue (a quota may have shrunk after it
# was accepted); it is shown with the nearest waiting reason.
_NEVER_TO_REASON = {
    FLAVOR_UNKNOWN: CAPACITY,
    NODE_SIZE: CAPACITY,
    USER_CAP: USER_CAP,
}


# A promised request that waits for one of these still waits for what the reclaim frees.
_STILL_PROMISED = (RECLAIM_PENDING, COHORT_QUOTA, CAPACITY, HEAD_OF_LINE)


class PassChecks:
    """The mutable state of one pass and its checks; :class:`~clusters.admission.decide.PassState`
    runs the pass over them."""

    def __init__(self, snap: Snapshot, *, explain: bool = True) -> None:
        self.snap = snap
        # Without it, the reasons a request waits are kept but their messages are not
        # written (see :meth:`_why`).
        self.explain = explain
        self.aged_before = snap.now - snap.aging
        self.led = Ledger(snap)
        # The fleet's members and what each has free (none: nothing is placed).
        self.placer = Placer(snap.members, self.led.flavors, snap.running)
        self.placements: dict[int, tuple[str, str]] = {}
        # The topology domain each admitted gang is pinned (or packed) to.
        self.domains: dict[int, str] = {}
        self.blocks: dict[Pool, Pending] = {}
        # GPUs being freed by suspensions and promised to the requests that asked for them.
        self.promises = Promises(self.led)
        self.reclaimed_from: dict[tuple[str, str], Decimal] = defaultdict(Decimal)
        self.victims: dict[tuple[str, str], list[Running]] = {}
        self.picked: set[int] = set()
        # The option each admitted request was admitted on, and, for every request that
        # accepts several flavors and waits, each flavor with why it waits there.
        self.placed: dict[int, Pending] = {}
        self.fungible: dict[int, list[tuple[Pending, tuple[str, str, Pool]]]] = {}
        # When each (cohort, flavor)'s reclaim under way will have freed its GPUs, and so
        # when each request waiting on it should start.
        self.reclaim_done: dict[tuple[str, str], datetime] = {}
        self.reclaim_etas: dict[int, datetime] = {}
        # The smallest deficit that borrowers could not cover, per (cohort, flavor), and
        # the cohort usage it was computed at: a larger deficit at the same usage fails
        # too, which keeps a queue full of reclaim candidates from rescanning victims.
        self.reclaim_failed: dict[tuple[str, str], tuple[Decimal, Decimal]] = {}
        # How often each (cohort, flavor) was asked to reclaim (the dry-run's recorder
        # reads it to know which steps could have read ``reclaim_failed``).
        self.reclaim_asked: dict[tuple[str, str], int] = defaultdict(int)
        # The candidates for priority preemption per flavor, in victim order, and when
        # each request that waits for protection windows to end should start.
        self.flavor_victims: dict[str, list[Running]] = {}
        self.protected_etas: dict[WaitKey, datetime] = {}
        self.decision = Decision()

    # -- checks -------------------------------------------------------------------

    # Named exception to ruff's C901 (max-complexity 12): one guard per limit in the order admission
    # applies them; split, the order would no longer read top to bottom.
    def blocked(  # noqa: C901
        self, p: Pending, *, may_reclaim: bool = True
    ) -> tuple[str, str, Pool] | None:
        """The first of ``p``'s own limits that stops it, as (reason, message, pool).

        ``may_reclaim`` ``False`` asks without suspending borrowers for ``p`` (a request
        that accepts several flavors first looks for one that fits as things are)."""
        led = self.led
        tenant = led.tenant(p.tenant)
        never = led.never_fits(p)
        if never:
            code, message = never[0]
            return self._why(
                _NEVER_TO_REASON.get(code, TENANT_QUOTA),
                ("never",),
                lambda: f"This request can never start as it is: {message}",
            )
        breach = led.cap_breach(p)
        if breach is not None:
            return self._why(
                USER_CAP, ("u", p.tenant, str(p.owner)), lambda: cap_message(p, breach)
            )
        # CPU and memory bind like GPUs do: say what is needed against what is unused.
        limits = (
            ("tcpu", tenant.cpu_quota, led.cpu[p.tenant], p.cpu, "CPU", "CPU"),
            (
                "tmem",
                tenant.memory_quota_gib,
                led.memory[p.tenant],
                p.memory_gib,
                "GiB",
                "GiB of memory",
            ),
        )
        over = next(
            (limit for limit in limits if limit[1] and limit[2] + limit[3] > limit[1]), None
        )
        if over is not None:
            pool, quota, used, need, unit, needed = over
            unused = max(quota - used, Decimal(0))
            return self._why(
                TENANT_QUOTA,
                (pool, p.tenant),
                lambda: (
                    f"This cluster needs {fmt(need)} {needed}; {p.tenant} has "
                    f"{fmt(unused)} of its {quota} {unit} unused."
                ),
            )
        key = (p.tenant, p.flavor)
        nominal = led.nominal.get(key, 0)
        borrow = led.borrow.get(key, 0)
        used = led.usage[key]
        if used + p.gpus > nominal + borrow:
            return self._why(
                TENANT_QUOTA, ("t", *key), lambda: quota_message(p, used, nominal, borrow)
            )
        promises = self.promises
        promised = promises.tenant_for(p)
        if promised and used + promised + p.gpus > nominal:
            # Whoever is promised reclaimed GPUs must stay within its nominal quota.
            return self._held_for_promise(p, ("t", *key))
        ckey = (led.cohort_of(p.tenant), p.flavor)
        cohort_total = led.cohort_nominal.get(ckey, 0)
        # What it takes from the cohort's pool: beyond what the tenant keeps for itself.
        draw = led.pool_draw(p.tenant, p.flavor, p.gpus)
        fits_now = led.cohort_usage[ckey] + draw <= cohort_total
        # What is promised to others must still be there once the borrowers are suspended.
        keeps_promises = (
            led.cohort_usage[ckey] + promises.cohort_for(p) + draw
            <= cohort_total + promises.releasing_cohort[ckey]
        )
        if not (fits_now and keeps_promises):
            if may_reclaim and (used + p.gpus <= nominal or p.may_preempt):
                # Borrowers are suspended (and lower classes preempted) only for a
                # request that would then start: not for one a request ahead holds back.
                ahead = self.held(p)
                if ahead is not None:
                    return ahead
                taking = self._take_back(p, ckey, within_nominal=used + p.gpus <= nominal)
                if taking is not None:
                    return taking
            if fits_now:
                return self._held_for_promise(p, ("c", *ckey))
            in_use = led.cohort_usage[ckey]
            return self._why(
                COHORT_QUOTA,
                ("c", *ckey),
                lambda: cohort_message(p, ckey[0], in_use, cohort_total, used, nominal),
            )
        free = led.free.get(p.flavor)
        if free is not None and p.booked != p.flavor:
            if p.gpus <= free and p.gpus + promises.fleet_for(p) > (
                free + promises.releasing_fleet[p.flavor]
            ):
                return self._held_for_promise(p, ("f", p.flavor))
            if may_reclaim and p.may_preempt and self._short_of_room(p, free):
                preempt = preempt_for_capacity(self, p)
                if preempt is not None:
                    return preempt
            if p.gpus > free:
                return self._why(
                    CAPACITY,
                    ("f", p.flavor),
                    lambda: (
                        f"No room on the fleet: {free_words(free, f'{p.flavor} GPU')} and this "
                        f"cluster needs {fmt(p.gpus)}."
                    ),
                )
            nodes = led.whole_free_nodes(p.flavor)
            if p.kind == PROD and nodes is not None and p.workers > nodes:
                return self._why(
                    CAPACITY,
                    ("f", p.flavor),
                    lambda: (
                        "No room on the fleet: a production worker takes a whole node and "
                        + free_words(nodes, f"{p.flavor} node", "entirely free")
                        + f"; {p.workers} are needed."
                    ),
                )
            no_domain = self.no_domain(p)
            if no_domain is not None:
                return no_domain
        if self.placer.members:
            placement = self.placer.choose(p)
            if placement.member is None:
                return self._why(CAPACITY, ("f", p.flavor), lambda: placement.waiting_words(p))
        return None

    def _short_of_room(self, p: Pending, free: Decimal) -> bool:
        """Whether the fleet lacks the GPUs, or a production gang the whole nodes, ``p``
        needs (the two capacity checks below)."""
        if p.gpus > free:
            return True
        nodes = self.led.whole_free_nodes(p.flavor)
        return p.kind == PROD and nodes is not None and p.workers > nodes

    def no_domain(self, p: Pending) -> tuple[str, str, Pool] | None:
        """``CAPACITY`` when ``p`` requires its workers in one domain of a level and no
        domain of that level has a whole free node for each (where nodes are known)."""
        asked = wish(p)
        room = self.led.domains.get(p.flavor)
        if asked is None or asked[1] != REQUIRED or room is None:
            return None
        fit = room.fit(asked[0], p.workers)
        if fit is None or fit.domain is not None:
            return None
        return self._why(
            CAPACITY, ("d", p.flavor, asked[0]), lambda: domain_message(p, asked[0], fit.most)
        )

    def _why(self, reason: str, pool: Pool, say: Callable[[], str]) -> tuple[str, str, Pool]:
        """(reason, message, pool); the message only when the pass explains (it costs)."""
        return reason, say() if self.explain else "", pool

    def draws_from(self, p: Pending) -> list[Pool]:
        """The pools an admission of ``p`` would take from (those an aged request holds)."""
        led = self.led
        tenant = led.tenant(p.tenant)
        pools: list[Pool] = [("t", p.tenant, p.flavor)]
        if tenant.cpu_quota:
            pools.append(("tcpu", p.tenant))
        if tenant.memory_quota_gib:
            pools.append(("tmem", p.tenant))
        if led.usage[p.tenant, p.flavor] + p.gpus > led.nominal.get((p.tenant, p.flavor), 0):
            pools.append(("c", led.cohort_of(p.tenant), p.flavor))
        if led.free.get(p.flavor) is not None:
            pools.append(("f", p.flavor))
        return pools

    def reclaim(self, p: Pending, ckey: tuple[str, str]) -> tuple[str, str, Pool] | None:
        """Pick borrowers' clusters to suspend so that ``p`` gets its nominal quota back.

        Victims are the lowest-priority, newest clusters of tenants that hold more than
        their nominal quota on the flavor; ``None`` when borrowers do not hold enough.
        """
        led = self.led
        self.reclaim_asked[ckey] += 1
        cohort_total = led.cohort_nominal.get(ckey, 0)
        deficit = (
            led.cohort_usage[ckey]
            + self.promises.cohort_for(p)
            + led.pool_draw(p.tenant, p.flavor, p.gpus)
            - cohort_total
            - self.promises.releasing_cohort[ckey]
        )
        asked = wish(p)
        room = led.domains.get(p.flavor)
        if deficit > 0 and asked is not None and asked[1] == REQUIRED and room is not None:
            fit = room.fit(asked[0], p.workers)
            if fit is not None and fit.domain is None:
                return self._reclaim_domain(p, ckey, deficit, asked[0], room)
        chosen: list[Running] = []
        failed = self.reclaim_failed.get(ckey)
        if failed is not None and failed[1] == led.cohort_usage[ckey] and deficit >= failed[0]:
            return None
        if deficit > 0:
            others = (
                r for r in self._victims(ckey) if r.id not in self.picked and r.tenant != p.tenant
            )
            found = pick(
                others,
                deficit,
                now=self.snap.now,
                grace=self.snap.reclaim_grace,
                amount=lambda r, taken: r.gpus if self._borrowed(r) - taken > 0 else Decimal(0),
            )
            if not found.enough:
                if found.waits_for is not None:
                    # Not remembered as failed: the next request may need fewer of them.
                    return self.protected(p, COHORT_QUOTA, ("c", *ckey), "Reclaims", found)
                self.reclaim_failed[ckey] = (deficit, led.cohort_usage[ckey])
                return None
            chosen = found.chosen
        return self._suspend(p, ckey, chosen)

    def _take_back(
        self, p: Pending, ckey: tuple[str, str], *, within_nominal: bool
    ) -> tuple[str, str, Pool] | None:
        """Reclaim borrowed quota for ``p`` (within its nominal quota), else preempt
        lower classes for it (its class may preempt); a reclaim that waits for protection
        windows gives way to a preemption that can start now."""
        waiting = self.reclaim(p, ckey) if within_nominal else None
        if not p.may_preempt or (waiting is not None and waiting[0] == RECLAIM_PENDING):
            return waiting
        key = (p.id, p.flavor)
        kept = self.protected_etas.pop(key, None)
        preempt = preempt_for_cohort(self, p, ckey)
        if preempt is not None and (waiting is None or preempt[0] == RECLAIM_PENDING):
            return preempt
        self.protected_etas.pop(key, None)
        if kept is not None:
            self.protected_etas[key] = kept
        return waiting

    def protected(
        self, p: Pending, reason: str, pool: Pool, lead: str, found: Pick
    ) -> tuple[str, str, Pool]:
        """``p`` waits for the protection windows of the running requests it could take
        to end (:mod:`clusters.admission.victims`): its reason is ``reason`` as before,
        its message says whose window and when, its ETA is ``found.starts_at``."""
        victim, starts_at = found.waits_for, found.starts_at
        assert victim is not None and starts_at is not None
        self.protected_etas[p.id, p.flavor] = starts_at
        notice = victim.notice(self.snap.reclaim_grace)
        return self._why(
            reason,
            pool,
            lambda: protected_message(
                p, lead, victim, self.snap.now, notice, self._why_protected(p, reason)
            ),
        )

    def _why_protected(self, p: Pending, reason: str) -> str:
        if reason == CAPACITY:
            return f"Until then no room on the fleet: {p.flavor} GPUs are in use."
        return (
            f"Until then the {self.led.cohort_of(p.tenant)} cohort has no unused {p.flavor} "
            "GPUs for it."
        )

    def _borrowed(self, r: Running) -> Decimal:
        """The GPUs ``r``'s tenant borrows on its flavor, less what is reclaimed already."""
        vkey = (r.tenant, r.flavor)
        led = self.led
        return led.usage[vkey] - led.nominal.get(vkey, 0) - self.reclaimed_from[vkey]

    def _reclaim_domain(
        self, p: Pending, ckey: tuple[str, str], deficit: Decimal, level: str, room: FreeNodes
    ) -> tuple[str, str, Pool]:
        """:meth:`reclaim` for a gang that requires one domain of ``level`` and finds none
        with room: suspend only borrowers' gangs pinned in the one domain that then holds
        it (:mod:`clusters.admission.domain_reclaim`), or none, and say so."""
        now = self.snap.now
        candidates = [
            r
            for r in self._victims(ckey)
            if r.id not in self.picked and r.tenant != p.tenant and not r.protected(now)
        ]
        free = room.per_domain(room.levels.index(level))
        found = free_a_domain(
            candidates,
            free,
            level=level,
            workers=p.workers,
            deficit=deficit,
            borrowed=self._borrowed,
        )
        if found.domain is None:
            return self._why(
                COHORT_QUOTA,
                ("c", *ckey),
                lambda: domain_reclaim_message(p, ckey[0], level, found.most),
            )
        # What is free there now is kept for it too: the reclaim is what completes it.
        room.take(level, found.domain, min(free[found.domain], p.workers))
        return self._suspend(p, ckey, list(found.victims), found.domain)

    def _suspend(
        self,
        p: Pending,
        ckey: tuple[str, str],
        chosen: list[Running],
        domain: str | None = None,
    ) -> tuple[str, str, Pool]:
        """Warn ``chosen`` and promise what they free to ``p``;
        ``domain``: the one domain their nodes are freed in for it."""

        def told(r: Running, notice: timedelta) -> str:
            if r.id < 0:
                then = (
                    "Its growth beyond its guaranteed size is taken back now; it shrinks to "
                    "that size and keeps running."
                )
            elif r.reclaimable:
                then = (
                    f"This cluster will be suspended (not deleted) in "
                    f"{minutes_words(notice.total_seconds())}; resume it later to queue again."
                )
            else:
                then = (
                    f"It is given notice now and stopped in "
                    f"{minutes_words(notice.total_seconds())}, then queues again."
                )
            return (
                f"{r.tenant} is borrowing {r.flavor} GPUs that {p.tenant} now needs within "
                f"its own quota. {then}"
            )

        _, notice = self.warn(p, chosen, cause="reclaim", key=ckey, told=told)
        grace = minutes_words(notice.total_seconds())
        where = ""
        if domain is not None:
            asked = wish(p)
            word = level_word(asked[0]) if asked is not None else "domain"
            where = f" in {word} {domain}, which then holds all {p.workers} of its workers,"
        return (
            RECLAIM_PENDING,
            f"{p.tenant} is within its nominal {p.flavor} quota, but other teams of the "
            f"{ckey[0]} cohort are borrowing it; their clusters{where} are being reclaimed "
            f"and will be suspended within {grace}.",
            ("c", *ckey),
        )

    def warn(
        self,
        p: Pending,
        chosen: list[Running],
        *,
        cause: str,
        key: tuple[str, str],
        told: Callable[[Running, timedelta], str],
    ) -> tuple[datetime, timedelta]:
        """Warn ``chosen`` for ``p`` (a reclaim or a priority preemption: ``cause``),
        each told ``told(victim, its notice)``, and promise what they free to ``p``.
        Returns when the last of them is stopped (at least what ``key``'s earlier
        takings finish at) and the longest notice (the snapshot's grace if none)."""
        snap = self.snap
        done = self.reclaim_done.get(key, snap.now)
        longest = timedelta(0) if chosen else snap.reclaim_grace
        for r in chosen:
            notice = r.notice(snap.reclaim_grace)
            longest = max(longest, notice)
            # A victim warned by an earlier pass keeps its deadline.
            done = max(done, r.suspend_at or snap.now + notice)
            self.picked.add(r.id)
            self.reclaimed_from[r.tenant, r.flavor] += r.gpus
            self.promises.freeing((self.led.cohort_of(r.tenant), r.flavor), r.gpus)
            self.decision.reclaim.append(
                Reclaim(
                    id=r.id,
                    tenant=r.tenant,
                    flavor=r.flavor,
                    gpus=r.gpus,
                    for_tenant=p.tenant,
                    for_request=p.id,
                    message=told(r, notice),
                    cause=cause,
                    notice_seconds=r.notice_seconds,
                )
            )
        self.promises.promise(p)
        self.reclaim_done[key] = done
        self.reclaim_etas[p.id] = done
        return done, longest

    def held(self, p: Pending) -> tuple[str, str, Pool] | None:
        """``HEAD_OF_LINE`` when a request ahead holds one of the pools ``p`` draws from."""
        for pool in self.draws_from(p):
            holder = self.blocks.get(pool)
            if holder is None:
                continue
            if pool[0] == "f" and self._fits_beside(holder, p):
                continue  # it uses only what the holder cannot
            if not self.explain:
                return HEAD_OF_LINE, "", pool
            if holder.id in self.promises.holders and holder.created_at > self.aged_before:
                return (HEAD_OF_LINE, promised_message(_named(holder), p.flavor), pool)
            waited = minutes_words((self.snap.now - holder.created_at).total_seconds())
            return (
                HEAD_OF_LINE,
                f"Held behind {_named(holder)}, which has waited {waited} and now "
                "goes first for the same GPUs, so that smaller requests cannot keep "
                "passing it.",
                pool,
            )
        return None

    def _fits_beside(self, holder: Pending, p: Pending) -> bool:
        """Whether ``p`` can start on the flavor's partly used nodes without taking
        anything from ``holder``, a production cluster that holds the flavor's capacity.

        A production worker takes a whole node, so the free GPUs of nodes already in use
        are no use to it: a request whose workers fit there (single-GPU workers, and no
        more GPUs than those nodes have free) leaves every whole free node to it and does
        not delay it (the ledger's ``take_capacity`` keeps the whole free nodes then).
        This is what lets dev clusters use the scraps of a fleet while a production
        cluster waits for nodes to drain."""
        if holder.kind != PROD or p.kind == PROD or p.worker_gpus > 1:
            return False
        led = self.led
        free = led.free.get(p.flavor)
        nodes = led.whole_free_nodes(p.flavor)
        flavor = led.flavors.get(p.flavor)
        if free is None or nodes is None or flavor is None:
            return False
        return p.gpus <= free - nodes * flavor.gpus_per_node

    def _held_for_promise(self, p: Pending, pool: Pool) -> tuple[str, str, Pool]:
        """``p`` would fit, but only by taking GPUs promised to a request that borrowed
        quota is being reclaimed for."""
        if not self.explain:
            return HEAD_OF_LINE, "", pool
        holder = self.promises.holder(p, pool)
        who = _named(holder) if holder is not None else "another request"
        return (HEAD_OF_LINE, promised_message(who, p.flavor), pool)

    def _victims(self, ckey: tuple[str, str]) -> list[Running]:
        found = self.victims.get(ckey)
        if found is None:
            cohort, flavor = ckey
            found = [
                r
                for r in self.snap.running
                if r.flavor == flavor
                and may_be_stopped(r)
                and self.led.cohort_of(r.tenant) == cohort
            ]
            # The lowest class first, then the lowest priority, then the newest.
            found.sort(key=victim_order)
            self.victims[ckey] = found
        return found

    # -- the pass -----------------------------------------------------------------


def _named(p: Pending) -> str:
    """A request in a message; a negative id is a running request's surge or growth
    (:func:`~clusters.admission.snapshot.extra_of`)."""
    if p.id >= 0:
        return f"request {p.id}"
    what, request = extra_of(p.id)
    return f"the {what} of request {request}"
