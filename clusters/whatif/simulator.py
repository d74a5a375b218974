"""An event-driven, time-accelerated replay of the queue: the product's own pass, no other.

The clock jumps from event to event; at each instant with events the state becomes a
:class:`~clusters.admission.Snapshot` for :func:`clusters.admission.decide`, as in the
admission task, and what it admits is placed node by node
(:mod:`clusters.whatif.node_placement`). A pass that could only repeat the last one is
skipped (none is, with a half-life: decayed usage moves with the clock). A reclaimed run
loses the work since its last checkpoint, or saves first given notice
(:mod:`clusters.whatif.preemption`). Deterministic; what is not modelled: docs/whatif.md.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections import defaultdict
from dataclasses import replace
from datetime import timedelta
from decimal import Decimal

from clusters.admission import (
    DEV,
    PROD,
    FlavorOption,
    FlavorQ,
    Pending,
    Running,
    Snapshot,
    decide,
)
from clusters.admission.decayed_usage import RecentUsage
from clusters.whatif import preemption
from clusters.whatif.model import FIFO, MODES, POLICY, Demand, Workload, World
from clusters.whatif.node_placement import (
    fitted_domains,
    free_node_domains,
    gang_wish,
    pinned_level,
    place,
    stranded,
)
from clusters.whatif.recent import DecayedTotals, Held
from clusters.whatif.replay_state import (
    LiveRun,
    NodePools,
    Outcome,
    Placement,
    QueuedRun,
    Record,
    ReplayState,
    Sample,
)

# While anything waits, a pass runs at least this often (the beat's admission tick), so
# that a request's aging takes effect without another event.
TICK_SECONDS = 300.0
# Passes run on a grid of this many simulated seconds (see :func:`simulate`): the
# simulated week then costs about four thousand passes (a pass over a few hundred waiting
# requests takes milliseconds), and a wait is rounded up to the grid.
PASS_SECONDS = 120.0

_ARRIVE, _END, _IDLE, _PASS = "arrive", "end", "idle", "pass"


def simulate(
    world: World,
    workload: Workload,
    *,
    mode: str = POLICY,
    pass_seconds: float = PASS_SECONDS,
    topology_aware: bool = True,
) -> Outcome:
    """Replay ``workload`` on ``world`` under ``mode`` (one of :data:`MODES`); admission
    passes run at most every ``pass_seconds`` of simulated time; ``topology_aware``
    False hides the topology from the pass (see the module's docstring)."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; expected one of {', '.join(MODES)}")
    # Per-engineer caps are not modelled (docs/whatif.md): a replayed request already
    # passed them when it was asked for, and the synthetic owners are nobody in particular.
    world = replace(
        _as_mode(world, mode),
        tenants=[
            replace(t, max_dev_clusters_per_user=None, max_dev_gpus_per_user=None)
            for t in world.tenants
        ],
    )
    pools = NodePools.of_world(world)
    world = replace(world, node_domains=fitted_domains(world, pools))
    st = ReplayState(
        world=world,
        workload=workload,
        mode=mode,
        flavors={f.name: f for f in world.flavors},
        free={pool: [Decimal(pools.units[pool])] * n for pool, n in pools.nodes.items()},
        pools=pools,
        aware=topology_aware,
        recent=DecayedTotals(world.half_life) if world.half_life is not None else None,
    )
    clock = _Clock(pass_seconds)
    for d in workload.demands:
        st.records[d.id] = Record(d)
        if d.arrival < workload.seconds:
            clock.push(d.arrival, _ARRIVE, d.id)
    samples: list[Sample] = []
    sampled = -1
    passes = 0
    while clock.events:
        now = clock.events[0][0]
        if now >= workload.seconds:
            break
        if _instant(st, clock, now):
            passes += 1
        # Nothing changed since the last sample: the same fleet from now on.
        samples.append(_sample(st, now) if st.version != sampled else replace(samples[-1], at=now))
        sampled = st.version
    _close(st, workload.seconds)
    return Outcome(mode, workload.seconds, st.records, samples, passes, st.placements)


class _Clock:
    """The event heap; passes are kept to one per instant on the grid."""

    def __init__(self, pass_seconds: float) -> None:
        self.pass_seconds = pass_seconds
        self.events: list[tuple[float, int, str, int, int]] = []
        self.seq = itertools.count()
        self.due: set[float] = set()

    def push(self, at: float, kind: str, ident: int = 0, token: int = 0) -> None:
        heapq.heappush(self.events, (at, next(self.seq), kind, ident, token))

    def schedule_pass(self, at: float) -> None:
        if at not in self.due:
            self.due.add(at)
            self.push(at, _PASS)


def _instant(st: ReplayState, clock: _Clock, now: float) -> bool:
    """Handle every event at ``now`` and, when one is due, run a pass; whether one ran."""
    run_pass = False
    while clock.events and clock.events[0][0] == now:
        _, _, kind, ident, token = heapq.heappop(clock.events)
        if kind == _PASS:
            run_pass = True
            continue
        _handle(st, now, kind, ident, token)
        for caused in st.pending_events:
            clock.push(*caused)
        st.pending_events.clear()
        # Passes run on a grid of ``pass_seconds``: what happens within one step is
        # decided together, as the real queue batches its nudges.
        clock.schedule_pass(math.ceil(now / clock.pass_seconds) * clock.pass_seconds)
    clock.due.discard(now)
    if not run_pass:
        return False
    if _repeats(st, now):
        if st.queued:
            clock.schedule_pass(now + TICK_SECONDS)
        return False
    before = st.version
    for when, kind, ident, token in _admission_pass(st, now):
        if kind == _PASS:
            clock.schedule_pass(when)
        else:
            clock.push(when, kind, ident, token)
    if st.queued:
        # While anything waits, the beat's tick lets aging take effect.
        clock.schedule_pass(now + TICK_SECONDS)
    st.quiet = (st.version, now) if st.version == before else None
    return True


def _repeats(st: ReplayState, now: float) -> bool:
    """Whether a pass now would repeat the last one, which changed nothing (see the
    module's docstring)."""
    if st.quiet is None or st.quiet[0] != st.version or st.recent is not None:
        # Decayed usage moves with the clock: a pass may order differently later.
        return False
    last = st.quiet[1]
    aging = st.world.aging.total_seconds()
    if any(last < q.since + aging <= now for q in st.queued.values()):
        return False
    return not any(at <= now for at in st.warned.values())


def _as_mode(world: World, mode: str) -> World:
    """The world a baseline sees: FIFO has no borrowing and every request ages at once
    (so the oldest holds its pool: strict first come, first served within a priority)."""
    if mode != FIFO:
        return world
    return replace(
        world,
        quotas=[replace(q, borrow_limit=0) for q in world.quotas],
        aging=timedelta(0),
        idle={},
    )


def _handle(st: ReplayState, now: float, kind: str, ident: int, token: int) -> None:
    if kind == _ARRIVE:
        d = st.records[ident].demand
        _queue(st, d, now, d.hold, d.busy)
        flavor = st.flavors.get(d.flavors[0]) if d.running else None
        if flavor is not None:
            placed = place(st, flavor, d)
            if placed is not None:
                for when, what, which, token in _start(st, st.queued[ident], flavor, placed, now):
                    st.pending_events.append((when, what, which, token))
    elif kind == _END:
        live = st.live.get(ident)
        if live is not None and live.token == token:
            _stop(st, live, now)
            st.records[ident].done = True
    elif kind == _IDLE:
        live = st.live.get(ident)
        if live is not None and live.token == token:
            rec = st.records[ident]
            rec.idle_suspended += 1
            rec.reclaimed_idle_gpu_seconds += float(live.gpus) * (live.ends - now)
            _stop(st, live, now)
            # The work was done and the owner had walked away: it does not come back.
            rec.done = True


def _stop(st: ReplayState, live: LiveRun, now: float) -> None:
    """Release a running demand's GPUs and account for what it held."""
    rec = st.records[live.demand.id]
    rec.gpu_seconds += float(live.gpus) * (now - live.started)
    if st.recent is not None:
        st.recent.ended(_held(live), now)
    if live.idle_from is not None and now > live.idle_from:
        rec.idle_gpu_seconds += float(live.gpus) * (now - live.idle_from)
    flavor = st.flavors[live.flavor]
    nodes = st.free[st.pools.of[flavor.name]]
    for index, gpus in live.nodes:
        nodes[index] += gpus * st.pools.scale(flavor)
    live.placement.end = now
    del st.live[live.demand.id]
    st.warned.pop(live.demand.id, None)
    st.version += 1


def _pending(st: ReplayState, q: QueuedRun) -> Pending | None:
    d = q.demand
    names = [n for n in d.flavors if n in st.flavors]
    if st.mode == FIFO:
        names = names[:1]
    if not names:
        return None
    options = [
        FlavorOption(n, d.gpus_on(st.flavors[n]), worker_gpus=d.worker_gpus_on(st.flavors[n]))
        for n in names
    ]
    first = options[0]
    level, mode = gang_wish(st, d) if st.aware else ("", "")
    return Pending(
        id=d.id,
        tenant=d.tenant,
        owner=d.owner,
        flavor=first.flavor,
        kind=d.kind,
        gpus=first.gpus,
        created_at=st.workload.start
        + timedelta(seconds=q.since if q.created is None else q.created),
        priority=d.priority,
        workers=d.workers,
        worker_gpus=first.worker_gpus,
        ttl=timedelta(seconds=d.ttl) if d.ttl is not None else None,
        fallbacks=tuple(options[1:]),
        topology_level=level,
        topology_mode=mode,
    )


def _snapshot(st: ReplayState, now: float) -> Snapshot:
    start = st.workload.start
    flavors = []
    for f in st.world.flavors:
        pool, scale = st.pools.of[f.name], st.pools.scale(f)
        flavors.append(
            replace(
                f,
                # Whole devices per node (a flavor of its own keeps fractions: KAI's).
                free_gpus=sum((g if scale == 1 else g // scale for g in st.free[pool]), Decimal(0)),
                free_nodes=sum(1 for g in st.free[pool] if g == st.pools.units[pool]),
                free_node_domains=free_node_domains(st, f),
            )
        )
    running = [
        replace(live.running, suspend_at=start + timedelta(seconds=st.warned[ident]))
        if ident in st.warned
        else live.running
        for ident, live in st.live.items()
    ]
    pending = [q.pending for q in st.queued.values() if q.pending is not None]
    return Snapshot(
        now=start + timedelta(seconds=now),
        tenants=st.world.tenants,
        flavors=flavors,
        quotas=st.world.quotas,
        running=running,
        pending=pending,
        aging=st.world.aging,
        reclaim_grace=st.world.reclaim_grace,
        cohort_parents=st.world.cohort_parents,
        recent=(
            st.recent.usage(now, [_held(live) for live in st.live.values()])
            if st.recent is not None
            else RecentUsage()
        ),
    )


def _held(live: LiveRun) -> Held:
    d = live.demand
    return Held(d.tenant, d.owner, live.flavor, live.gpus, live.started)


def _admission_pass(st: ReplayState, now: float) -> list[tuple[float, str, int, int]]:
    """One pass of the product's decision over the state, applied; the events it causes."""
    later: list[tuple[float, str, int, int]] = []
    if not st.queued and not st.warned:
        return later
    decision = decide(_snapshot(st, now), explain=False)
    for ident in decision.admitted:
        q = st.queued[ident]
        flavor = st.flavors[decision.placed.get(ident, q.demand.flavors[0])]
        domain = decision.domains.get(ident, "") if st.aware else ""
        placed = place(st, flavor, q.demand, domain)
        if placed is None and domain and gang_wish(st, q.demand)[1] != "required":
            # A preferred domain that cannot take the gang after all: anywhere will do.
            domain = ""
            placed = place(st, flavor, q.demand)
        if placed is None:
            # The pass's free-node estimate was optimistic (free GPUs scattered over
            # nodes, or not in one domain): it waits for the next pass, as a gang whose
            # pods cannot bind does.
            continue
        later.extend(_start(st, q, flavor, placed, now, domain))
    for ident in decision.earmarked:
        marked = st.queued.get(ident)
        if marked is not None and marked.pending is not None and not marked.pending.earmarked:
            marked.pending = replace(marked.pending, earmarked=True)
            st.version += 1
    if st.mode == POLICY:
        later.extend(_reclaim(st, [r.id for r in decision.reclaim], now))
    return later


def _running(st: ReplayState, d: Demand, flavor: FlavorQ, now: float, domain: str = "") -> Running:
    """The pure view of a demand running on ``flavor`` since ``now`` (pinned to
    ``domain`` of its topology level, if any)."""
    start = st.workload.start
    return Running(
        id=d.id,
        tenant=d.tenant,
        owner=d.owner,
        flavor=flavor.name,
        kind=d.kind,
        gpus=d.gpus_on(flavor),
        priority=d.priority,
        admitted_at=start + timedelta(seconds=now),
        expires_at=start + timedelta(seconds=now + d.ttl) if d.ttl is not None else None,
        nodes=d.workers if d.kind == PROD else 0,
        # A job gives its GPUs back when it ends; without reclaim nothing is taken back.
        reclaimable=st.mode == POLICY and not d.job,
        topology_level=pinned_level(st, flavor, d) if domain else "",
        topology_domain=domain,
    )


def _queue(
    st: ReplayState,
    d: Demand,
    since: float,
    hold: float,
    busy: float | None,
    created: float | None = None,
) -> None:
    """Put ``d`` in the queue (again) from ``since`` (in line by ``created``, if given)."""
    q = QueuedRun(d, since, hold, busy, created=created)
    q.pending = _pending(st, q)
    st.queued[d.id] = q
    st.version += 1


def _start(
    st: ReplayState,
    q: QueuedRun,
    flavor: FlavorQ,
    placed: list[tuple[int, Decimal]],
    now: float,
    domain: str = "",
) -> list[tuple[float, str, int, int]]:
    d = q.demand
    del st.queued[d.id]
    rec = st.records[d.id]
    rec.wait += now - q.since
    if rec.started is None:
        rec.started = now
        rec.flavor = flavor.name
    life = min(q.hold, d.ttl) if d.ttl is not None else q.hold
    token = next(st.tokens)
    idle_from = now + q.busy if q.busy is not None and q.busy < life else None
    policy = st.world.idle_of(d.tenant)
    suspend_at = None
    if (
        idle_from is not None
        and policy.minutes > 0
        and not d.job
        and (d.kind == DEV or policy.prod)
        and st.mode == POLICY
    ):
        at = idle_from + 60 * (policy.minutes + policy.grace_minutes)
        suspend_at = at if at < now + life else None
    placement = Placement(d.id, flavor.name, tuple(i for i, _ in placed), now, domain=domain)
    st.placements.append(placement)
    live = LiveRun(
        demand=d,
        flavor=flavor.name,
        gpus=d.gpus_on(flavor),
        started=now,
        ends=now + life,
        idle_from=idle_from,
        suspend_idle_at=suspend_at,
        nodes=placed,
        token=token,
        running=_running(st, d, flavor, now, domain),
        placement=placement,
    )
    st.live[d.id] = live
    st.version += 1
    events = [(live.ends, _END, d.id, token)]
    if suspend_at is not None:
        events.append((suspend_at, _IDLE, d.id, token))
    return events


def _reclaim(st: ReplayState, chosen: list[int], now: float) -> list[tuple[float, str, int, int]]:
    """Warn new victims, suspend those whose grace ran out (they queue again with what is
    left of their life), reprieve those no longer chosen."""
    later: list[tuple[float, str, int, int]] = []
    wanted = set(chosen)
    for ident in [i for i in st.warned if i not in wanted]:
        del st.warned[ident]
        st.version += 1
    notice = st.world.notice is not None
    grace = (st.world.notice or st.world.reclaim_grace).total_seconds()
    suspended = False
    for ident in chosen:
        live = st.live.get(ident)
        if live is None:
            continue
        d = live.demand
        if ident not in st.warned:
            # With notice, a run that saves within it is stopped once saved.
            at = now + preemption.stop_after(grace, notice=notice, save_seconds=d.save_seconds)
            st.warned[ident] = at
            live.warned_at = now
            st.version += 1
            later.append((at, _PASS, 0, 0))
        elif st.warned[ident] <= now:
            kept = preemption.work_kept(
                now - live.started,
                checkpoint_every=d.checkpoint_every,
                warned_at=None if live.warned_at is None else live.warned_at - live.started,
                grace=grace,
                notice=notice,
                save_seconds=d.save_seconds,
            )
            left_busy = None
            if live.idle_from is not None:
                left_busy = max(live.idle_from - live.started - kept.kept, 0.0)
            _stop(st, live, now)
            rec = st.records[ident]
            rec.reclaimed += 1
            rec.lost_gpu_seconds += float(live.gpus) * kept.lost
            # It does again what it lost; with notice it keeps its place in line.
            _queue(
                st,
                d,
                now,
                live.ends - live.started - kept.kept,
                left_busy,
                created=d.arrival if notice and st.world.keep_place else None,
            )
            suspended = True
    if suspended:
        # What the suspension freed goes to the request it was reclaimed for at once.
        later.append((now, _PASS, 0, 0))
    return later


def _sample(st: ReplayState, now: float) -> Sample:
    held: dict[str, Decimal] = defaultdict(Decimal)
    demand: dict[str, Decimal] = defaultdict(Decimal)
    by_tenant: dict[tuple[str, str], Decimal] = defaultdict(Decimal)
    backlogged: dict[str, set[str]] = defaultdict(set)
    for live in st.live.values():
        held[live.flavor] += live.gpus
        demand[live.flavor] += live.gpus
        by_tenant[live.demand.tenant, live.flavor] += live.gpus
    for q in st.queued.values():
        names = [n for n in q.demand.flavors if n in st.flavors]
        if not names:
            continue
        demand[names[0]] += q.demand.gpus_on(st.flavors[names[0]])
        backlogged[names[0]].add(q.demand.tenant)
    return Sample(
        now,
        dict(held),
        dict(demand),
        dict(by_tenant),
        {k: frozenset(v) for k, v in backlogged.items()},
        stranded(st),
    )


def _close(st: ReplayState, end: float) -> None:
    """Account for what still runs or waits when the period ends."""
    for live in list(st.live.values()):
        _stop(st, live, end)
    for q in st.queued.values():
        st.records[q.demand.id].wait += end - q.since
