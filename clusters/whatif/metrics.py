"""The figures of a run: allocation while oversubscribed, fairness, waits, GPU-hours.

Defined in docs/whatif.md. In short: *allocation* is GPUs held over GPUs there are while
a flavor's demand exceeds them; *fairness* is Jain's index over tenants of a flavor,
while each wanted more, of the GPUs held per unit of weight; a *wait* sums every time a
request queued (a reclaimed one queues again); *starved* waited over ``starve_after``;
*idle GPU-hours reclaimed* run from an idle suspension to when the cluster would have
ended otherwise. Issue 49's measures: *weekly fairness* (:mod:`clusters.whatif.fairness`),
*lost GPU-hours* (work since the last checkpoint of preempted runs:
:mod:`clusters.whatif.preemption`) and preemptions per request that started.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from decimal import Decimal

from clusters.admission import PROD
from clusters.whatif import fairness
from clusters.whatif.model import World
from clusters.whatif.replay_state import Outcome

STARVE_AFTER = 12 * 3600.0


@dataclass(frozen=True)
class TenantFigures:
    """One tenant's requests, mean and 95th-percentile wait (seconds), the requests that
    never started, the GPU-hours it held, its median and 90th-percentile wait, and the
    GPU-hours it asked for (each request's GPUs on its first flavor over its life)."""

    tenant: str
    requests: int
    mean_wait: float
    p95_wait: float
    unserved: int
    gpu_hours: float
    median_wait: float = 0.0
    p90_wait: float = 0.0
    asked_gpu_hours: float = 0.0


@dataclass(frozen=True)
class Figures:
    """The headline figures of one run (see the module's docstring)."""

    mode: str
    allocation: float | None
    oversubscribed_hours: float
    jain: float | None
    mean_wait: float
    p95_wait: float
    starved: int
    unserved: int
    gpu_hours: float
    idle_gpu_hours: float
    idle_reclaimed_gpu_hours: float
    reclaims: int
    tenants: tuple[TenantFigures, ...]
    passes: int
    # Issue 49 (see the module's docstring): Jain's index over the period, GPU-hours of
    # work lost to preemption, and preemptions per request that started (mean, most).
    weekly_jain: float | None = None
    lost_gpu_hours: float = 0.0
    preemptions_mean: float = 0.0
    preemptions_max: int = 0


def percentile(values: list[float], q: float) -> float:
    """The ``q``-th percentile (nearest rank; 0 of nothing)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(math.ceil(q / 100 * len(ordered)), 1)
    return ordered[rank - 1]


jain = fairness.jain


def figures(world: World, outcome: Outcome, *, starve_after: float = STARVE_AFTER) -> Figures:
    """The figures of ``outcome``, a run on ``world``."""
    capacity = {f.name: Decimal(f.total_gpus) for f in world.flavors}
    weights = {t.slug: float(t.weight) for t in world.tenants}
    held_s = cap_s = over_s = 0.0
    # Per (flavor, tenant): GPU-seconds held and seconds spent backlogged while the
    # flavor was oversubscribed.
    backlog_held: dict[tuple[str, str], float] = defaultdict(float)
    backlog_time: dict[tuple[str, str], float] = defaultdict(float)
    samples = outcome.samples
    for i, s in enumerate(samples):
        until = samples[i + 1].at if i + 1 < len(samples) else outcome.seconds
        dt = until - s.at
        if dt <= 0:
            continue
        any_over = False
        for name, gpus in capacity.items():
            if gpus <= 0 or s.demand.get(name, Decimal(0)) <= gpus:
                continue
            any_over = True
            held_s += float(s.held.get(name, Decimal(0))) * dt
            cap_s += float(gpus) * dt
            for t in s.backlogged.get(name, frozenset()):
                backlog_held[name, t] += float(s.by_tenant.get((t, name), Decimal(0))) * dt
                backlog_time[name, t] += dt
        if any_over:
            over_s += dt
    jain_sum = jain_weight = 0.0
    for name, gpus in capacity.items():
        xs = [
            backlog_held[key] / backlog_time[key] / weights.get(key[1], 1.0)
            for key in sorted(backlog_time)
            if key[0] == name and backlog_time[key] > 0
        ]
        if len(xs) > 1:
            # Flavors count by their GPUs, as the allocation does.
            jain_sum += jain(xs) * float(gpus)
            jain_weight += float(gpus)
    waits, unserved, hours, totals = _per_request(outcome, starve_after)
    asked = _asked(world, outcome)
    all_waits = [w for ws in waits.values() for w in ws]
    tenants = tuple(
        TenantFigures(
            tenant=slug,
            requests=len(waits[slug]),
            mean_wait=sum(waits[slug]) / len(waits[slug]) if waits[slug] else 0.0,
            p95_wait=percentile(waits[slug], 95),
            unserved=unserved[slug],
            gpu_hours=hours[slug],
            median_wait=percentile(waits[slug], 50),
            p90_wait=percentile(waits[slug], 90),
            asked_gpu_hours=asked.get(slug, 0.0),
        )
        for slug in sorted(set(waits) | {t.slug for t in world.tenants})
    )
    started = [r.reclaimed for r in outcome.records.values() if r.started is not None]
    return Figures(
        mode=outcome.mode,
        allocation=held_s / cap_s if cap_s else None,
        oversubscribed_hours=over_s / 3600,
        jain=jain_sum / jain_weight if jain_weight else None,
        mean_wait=sum(all_waits) / len(all_waits) if all_waits else 0.0,
        p95_wait=percentile(all_waits, 95),
        starved=int(totals["starved"]),
        unserved=sum(unserved.values()),
        gpu_hours=sum(hours.values()),
        idle_gpu_hours=totals["idle"],
        idle_reclaimed_gpu_hours=totals["reclaimed_idle"],
        reclaims=int(totals["reclaims"]),
        tenants=tenants,
        passes=outcome.passes,
        weekly_jain=fairness.weekly_jain(hours, asked, weights),
        lost_gpu_hours=totals["lost"],
        preemptions_mean=sum(started) / len(started) if started else 0.0,
        preemptions_max=max(started, default=0),
    )


def _asked(world: World, outcome: Outcome) -> dict[str, float]:
    """GPU-hours each tenant asked for in the period: every request that arrived, its
    GPUs on its first flavor over its life, cut at the period's end."""
    asked: dict[str, float] = defaultdict(float)
    for rec in outcome.records.values():
        d = rec.demand
        flavor = world.flavor(d.flavors[0])
        if d.arrival >= outcome.seconds or flavor is None:
            continue
        life = min(d.lifetime, outcome.seconds - d.arrival)
        asked[d.tenant] += float(d.gpus_on(flavor)) * life / 3600
    return dict(asked)


def _per_request(
    outcome: Outcome, starve_after: float
) -> tuple[dict[str, list[float]], dict[str, int], dict[str, float], dict[str, float]]:
    """Waits, requests never started and GPU-hours per tenant, and the run's totals."""
    waits: dict[str, list[float]] = defaultdict(list)
    unserved: dict[str, int] = defaultdict(int)
    hours: dict[str, float] = defaultdict(float)
    totals: dict[str, float] = defaultdict(float)
    for rec in outcome.records.values():
        d = rec.demand
        if d.arrival >= outcome.seconds:
            continue
        waits[d.tenant].append(rec.wait)
        hours[d.tenant] += rec.gpu_seconds / 3600
        totals["idle"] += rec.idle_gpu_seconds / 3600
        totals["reclaimed_idle"] += rec.reclaimed_idle_gpu_seconds / 3600
        totals["reclaims"] += rec.reclaimed
        totals["lost"] += rec.lost_gpu_seconds / 3600
        if rec.started is None:
            unserved[d.tenant] += 1
        if rec.wait > starve_after:
            totals["starved"] += 1
    return waits, unserved, hours, totals


@dataclass(frozen=True)
class TopologyFigures:
    """How a run placed the multi-node production gangs of one flavor with a topology:
    how many started, how many runs they had (a reclaimed gang starts again), the share of
    those runs whose nodes all sat in one domain
    of the flavor's finest level (a rack), the whole free nodes stranded in partly used
    domains of that level (time-averaged over the period), and the median and 90th
    percentile wait of those gangs (seconds; one that never started waited to the end)."""

    flavor: str
    level: str
    gangs: int
    runs: int
    in_one_domain: float | None
    stranded_nodes: float
    median_wait: float
    p90_wait: float
    unserved: int


def topology_figures(world: World, outcome: Outcome, *, flavor: str) -> TopologyFigures:
    """The topology figures of ``outcome``, a run on ``world``, for ``flavor``."""
    found = world.flavor(flavor)
    if found is None or not found.topology or flavor not in world.node_domains:
        raise ValueError(f"{flavor} has no topology in this world")
    domains = world.node_domains[flavor]
    runs = [
        p
        for p in outcome.placements
        if p.flavor == flavor and len(p.nodes) > 1 and outcome.records[p.id].demand.kind == PROD
    ]
    whole = sum(1 for p in runs if len({domains[n][-1] for n in p.nodes}) == 1)
    samples = outcome.samples
    stranded = 0.0
    for i, s in enumerate(samples):
        until = samples[i + 1].at if i + 1 < len(samples) else outcome.seconds
        stranded += s.stranded.get(flavor, 0) * max(until - s.at, 0.0)
    gangs = [
        rec
        for rec in outcome.records.values()
        if rec.demand.kind == PROD
        and rec.demand.workers > 1
        and rec.demand.flavors[0] == flavor
        and rec.demand.arrival < outcome.seconds
    ]
    waits = [rec.wait for rec in gangs]
    return TopologyFigures(
        flavor=flavor,
        level=found.topology[-1],
        gangs=len({p.id for p in runs}),
        runs=len(runs),
        in_one_domain=whole / len(runs) if runs else None,
        stranded_nodes=stranded / outcome.seconds if outcome.seconds else 0.0,
        median_wait=percentile(waits, 50),
        p90_wait=percentile(waits, 90),
        unserved=sum(1 for rec in gangs if rec.started is None),
    )
