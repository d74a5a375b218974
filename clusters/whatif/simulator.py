"""An event-driven, time-accelerated replay of the queue: the product's own pass, no other.

The clock jumps from event to event; at each instant with events the state becomes a
:class:`~clusters.admission.Snapshot` for :func:`clusters.admission.decide`, as in the
admission task, and what it admits is placed node by node (dev on the fullest node with
room, prod on a whole free node, so fragmentation shows). A prod gang goes to the free
nodes of the topology domain the decision pinned it to (``Decision.domains``); one that
asked no level and was packed there takes that domain's nodes first, then any (its
preferred node affinity); without a domain, or in a topology-blind run
(``topology_aware=False``: the pass sees no domains and no wishes, as before issue 48),
it takes the first whole free nodes in node order, whatever rack they are in. Heads,
pulls, start-up and the reconciler's latency are not modelled (docs/whatif.md).
Deterministic. A pass that could only repeat the last one (nothing changed, aged or ran
out of grace since) is skipped; the figures are the same as with every pass run
(``tests/clusters/whatif``). With a half-life (``World.half_life``) none is skipped, since
decayed usage moves with the clock; the pass is handed it as the real pass reads it
(:mod:`clusters.whatif.recent`). A reclaimed run loses and redoes the work since its last
checkpoint, or, given notice, saves first (:mod:`clusters.whatif.preemption`).
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections import defaultdict
from dataclasses import dataclass, field, replace
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
from clusters.admission.topology_room import packing_level
from clusters.whatif import node_domains, preemption
from clusters.whatif.model import FIFO, MODES, POLICY, Demand, Workload, World
from clusters.whatif.recent import DecayedTotals, Held

# While anything waits, a pass runs at least this often (the beat's admission tick), so
# that a request's aging takes effect without another event.
TICK_SECONDS = 300.0
# Passes run on a grid of this many simulated seconds (see :func:`simulate`): the
# simulated week then costs about four thousand passes (a pass over a few hundred waiting
# requests takes milliseconds), and a wait is rounded up to the grid.
PASS_SECONDS = 120.0

_ARRIVE, _END, _IDLE, _PASS = "arrive", "end", "idle", "pass"


@dataclass
class Record:
    """What happened to one demand: its wait (queued seconds, summed over every time it
    queued), when it first started, its GPU-seconds held (and of those idle), the
    GPU-seconds an idle suspension gave back, how often it was suspended, and the
    GPU-seconds of work its preemptions lost (:mod:`clusters.whatif.preemption`)."""

    demand: Demand
    wait: float = 0.0
    started: float | None = None
    flavor: str = ""
    gpu_seconds: float = 0.0
    idle_gpu_seconds: float = 0.0
    reclaimed_idle_gpu_seconds: float = 0.0
    reclaimed: int = 0
    idle_suspended: int = 0
    done: bool = False
    lost_gpu_seconds: float = 0.0


@dataclass(frozen=True)
class Sample:
    """The fleet from ``at`` until the next sample: GPUs held and asked for (held plus
    waiting, on each request's first preference) per flavor, GPUs held per
    (tenant, flavor), the tenants with a request waiting per flavor, and, per flavor
    with a topology, the whole free nodes stranded in domains of its finest level that
    are partly in use (free, but no gang wanting the whole domain can have them)."""

    at: float
    held: dict[str, Decimal]
    demand: dict[str, Decimal]
    by_tenant: dict[tuple[str, str], Decimal]
    backlogged: dict[str, frozenset[str]]
    stranded: dict[str, int] = field(default_factory=dict)


@dataclass
class Placement:
    """Where one run of a demand sat: the nodes of its flavor's pool (by index, one per
    worker; a dev gang may repeat one), from ``start`` to ``end`` (``None``: still there
    when the period ended), and the topology domain it was pinned to ("": none)."""

    id: int
    flavor: str
    nodes: tuple[int, ...]
    start: float
    end: float | None = None
    domain: str = ""


@dataclass
class Outcome:
    """A run: one record per demand, the samples, the passes it took."""

    mode: str
    seconds: float
    records: dict[int, Record]
    samples: list[Sample]
    passes: int = 0
    placements: list[Placement] = field(default_factory=list)


@dataclass
class _Live:
    demand: Demand
    flavor: str
    gpus: Decimal
    started: float
    ends: float
    idle_from: float | None
    suspend_idle_at: float | None
    nodes: list[tuple[int, Decimal]]
    token: int
    running: Running
    placement: Placement
    # When it was last warned of a reclaim (``None``: not warned).
    warned_at: float | None = None


@dataclass
class _Queued:
    demand: Demand
    since: float
    # What is left of its life and its busy time (it may have run before a suspension).
    hold: float
    busy: float | None
    pending: Pending | None = None
    # Its place in line (``None``: ``since``): a run preempted with notice keeps its
    # original submission time.
    created: float | None = None


@dataclass(frozen=True)
class _Pools:
    """The node pools flavors draw on (``World.shared_nodes``; else one per flavor). A
    pool's node holds ``units`` (the least common multiple of its flavors' devices per
    node), so that a device of each flavor is a whole number of units: on an H100 pool in
    MIG 1g.10gb x 7, a whole GPU is 7 units and a slice 1. Which GPU a slice is cut from
    is not modelled (a GPU with a slice in use is not whole, in reality)."""

    of: dict[str, str]  # flavor -> pool
    units: dict[str, int]  # pool -> units per node
    nodes: dict[str, int]  # pool -> nodes

    @classmethod
    def of_world(cls, world: World) -> _Pools:
        of = {f.name: world.shared_nodes.get(f.name, f.name) for f in world.flavors}
        units: dict[str, int] = {}
        nodes: dict[str, int] = {}
        for f in world.flavors:
            pool = of[f.name]
            units[pool] = math.lcm(units.get(pool, 1), max(f.gpus_per_node, 1))
            nodes[pool] = max(nodes.get(pool, 0), f.node_count)
        return cls(of, units, nodes)

    def scale(self, flavor: FlavorQ) -> int:
        """Units one device of ``flavor`` takes of its pool's node."""
        return self.units[self.of[flavor.name]] // max(flavor.gpus_per_node, 1)


@dataclass
class _State:
    world: World
    workload: Workload
    mode: str
    flavors: dict[str, FlavorQ]
    # Free room per node of each node pool (:class:`_Pools`), in the pool's units.
    free: dict[str, list[Decimal]]
    pools: _Pools
    queued: dict[int, _Queued] = field(default_factory=dict)
    live: dict[int, _Live] = field(default_factory=dict)
    warned: dict[int, float] = field(default_factory=dict)
    records: dict[int, Record] = field(default_factory=dict)
    tokens: itertools.count[int] = field(default_factory=itertools.count)
    # Events caused while handling others (a request running from the start).
    pending_events: list[tuple[float, str, int, int]] = field(default_factory=list)
    # Counts every change to what a pass reads (queued, running, warned, earmarked); and
    # the count and time after the last pass that changed nothing (see the docstring).
    version: int = 0
    quiet: tuple[int, float] | None = None
    # Whether the pass sees free nodes per domain and the gangs' wishes (see the docstring).
    aware: bool = True
    placements: list[Placement] = field(default_factory=list)
    # Usage-decayed fair share's totals (``World.half_life``; ``None``: off).
    recent: DecayedTotals | None = None


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
    pools = _Pools.of_world(world)
    world = replace(world, node_domains=_fitted_domains(world, pools))
    st = _State(
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


def _fitted_domains(world: World, pools: _Pools) -> dict[str, node_domains.Domains]:
    """The world's node domains, one per node of each pool (:func:`node_domains.fitted`)."""
    levels = {pools.of[f.name]: len(f.topology) for f in world.flavors if f.topology}
    return {
        pool: node_domains.fitted(domains, pools.nodes[pool], levels.get(pool, 1))
        for pool, domains in world.node_domains.items()
        if pool in pools.nodes
    }


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


def _instant(st: _State, clock: _Clock, now: float) -> bool:
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


def _repeats(st: _State, now: float) -> bool:
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


def _handle(st: _State, now: float, kind: str, ident: int, token: int) -> None:
    if kind == _ARRIVE:
        d = st.records[ident].demand
        _queue(st, d, now, d.hold, d.busy)
        flavor = st.flavors.get(d.flavors[0]) if d.running else None
        if flavor is not None:
            placed = _place(st, flavor, d)
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


def _stop(st: _State, live: _Live, now: float) -> None:
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


def _pending(st: _State, q: _Queued) -> Pending | None:
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
    level, mode = _wish(st, d) if st.aware else ("", "")
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


def _wish(st: _State, d: Demand) -> tuple[str, str]:
    """The level and mode a production gang asks for: its own, else what the world's
    ``gang_topology`` requires of a multi-node gang on its first flavor (none: "")."""
    if d.kind != PROD:
        return "", ""
    if d.topology_level:
        return d.topology_level, d.topology_mode or "required"
    level = st.world.gang_topology.get(d.flavors[0], "") if d.workers > 1 else ""
    return level, "required" if level else ""


def _snapshot(st: _State, now: float) -> Snapshot:
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
                free_node_domains=_free_node_domains(st, f),
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


def _held(live: _Live) -> Held:
    d = live.demand
    return Held(d.tenant, d.owner, live.flavor, live.gpus, live.started)


def _free_node_domains(st: _State, flavor: FlavorQ) -> node_domains.Domains | None:
    """Each whole free node's domains of ``flavor``'s topology, in node order (``None``:
    not shown to the pass: a blind run, or a flavor without a topology)."""
    pool = st.pools.of[flavor.name]
    domains = st.world.node_domains.get(pool)
    if not st.aware or not flavor.topology or domains is None:
        return None
    return node_domains.free_node_domains(domains, st.free[pool], st.pools.units[pool])


def _level(st: _State, flavor: FlavorQ, d: Demand) -> str:
    """The level of the domain a demand is pinned to: its wish's, else (a production
    gang that asks none, packed by the pass) the flavor's packing level."""
    return _wish(st, d)[0] or (packing_level(flavor.topology) if d.kind == PROD else "")


def _in_domain(st: _State, flavor: FlavorQ, level: str, domain: str) -> set[int] | None:
    """The nodes of ``flavor``'s pool in ``domain`` of ``level`` (``None``: anywhere)."""
    domains = st.world.node_domains.get(st.pools.of[flavor.name])
    if not domain or domains is None or level not in flavor.topology:
        return None
    return node_domains.nodes_in(domains, flavor.topology.index(level), domain)


def _place(
    st: _State, flavor: FlavorQ, demand: Demand, domain: str = ""
) -> list[tuple[int, Decimal]] | None:
    """Nodes for every worker (best fit; a prod worker a whole node, the first free ones
    in node order, within ``domain`` of the demand's topology level when given; a gang
    packed there without a level takes its nodes first, then any, as its preferred node
    affinity asks), or ``None``."""
    pool, scale = st.pools.of[flavor.name], st.pools.scale(flavor)
    within = _in_domain(st, flavor, _level(st, flavor, demand), domain)
    packed = not _wish(st, demand)[0]
    trial = list(st.free[pool])
    taken: list[tuple[int, Decimal]] = []
    per = demand.worker_gpus_on(flavor)
    for _ in range(demand.workers):
        fits = [(g, i) for i, g in enumerate(trial) if g >= per * scale]
        if demand.kind == PROD:
            fits = [(g, i) for g, i in fits if g == st.pools.units[pool]]
            if within is not None and packed:
                fits = [(g, i) for g, i in fits if i in within] or fits
            elif within is not None:
                fits = [(g, i) for g, i in fits if i in within]
        if not fits:
            return None
        _, index = min(fits)
        trial[index] -= per * scale
        taken.append((index, per))
    st.free[pool] = trial
    return taken


def _admission_pass(st: _State, now: float) -> list[tuple[float, str, int, int]]:
    """One pass of the product's decision over the state, applied; the events it causes."""
    later: list[tuple[float, str, int, int]] = []
    if not st.queued and not st.warned:
        return later
    decision = decide(_snapshot(st, now), explain=False)
    for ident in decision.admitted:
        q = st.queued[ident]
        flavor = st.flavors[decision.placed.get(ident, q.demand.flavors[0])]
        domain = decision.domains.get(ident, "") if st.aware else ""
        placed = _place(st, flavor, q.demand, domain)
        if placed is None and domain and _wish(st, q.demand)[1] != "required":
            # A preferred domain that cannot take the gang after all: anywhere will do.
            domain = ""
            placed = _place(st, flavor, q.demand)
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


def _running(st: _State, d: Demand, flavor: FlavorQ, now: float, domain: str = "") -> Running:
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
        topology_level=_level(st, flavor, d) if domain else "",
        topology_domain=domain,
    )


def _queue(
    st: _State,
    d: Demand,
    since: float,
    hold: float,
    busy: float | None,
    created: float | None = None,
) -> None:
    """Put ``d`` in the queue (again) from ``since`` (in line by ``created``, if given)."""
    q = _Queued(d, since, hold, busy, created=created)
    q.pending = _pending(st, q)
    st.queued[d.id] = q
    st.version += 1


def _start(
    st: _State,
    q: _Queued,
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
    live = _Live(
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


def _reclaim(st: _State, chosen: list[int], now: float) -> list[tuple[float, str, int, int]]:
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


def _sample(st: _State, now: float) -> Sample:
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
        _stranded(st),
    )


def _stranded(st: _State) -> dict[str, int]:
    """Per flavor with a topology, its pool's stranded whole free nodes
    (:func:`node_domains.stranded_nodes`)."""
    out: dict[str, int] = {}
    for f in st.world.flavors:
        pool = st.pools.of[f.name]
        domains = st.world.node_domains.get(pool)
        if f.topology and domains is not None:
            out[f.name] = node_domains.stranded_nodes(domains, st.free[pool], st.pools.units[pool])
    return out


def _close(st: _State, end: float) -> None:
    """Account for what still runs or waits when the period ends."""
    for live in list(st.live.values()):
        _stop(st, live, end)
    for q in st.queued.values():
        st.records[q.demand.id].wait += end - q.since
