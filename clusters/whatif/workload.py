"""A seeded synthetic week on kubesim's large fleet (64 x 8 H100 in 2 blocks of 4 racks of
8 nodes, 32 x 1 L4).

Ten tenants in two cohorts, weights 1 to 3 and H100 quotas in proportion, each free to
borrow its nominal again, send dev clusters (1-8 GPUs, mostly idle after a while), batch
jobs (8-32 GPUs, 1-10 h) and production clusters (1-4 whole nodes, 1-3 days). Arrivals
peak in working hours (:data:`RHYTHM`) at ``load`` times the fleet (:data:`LOAD`): the
fleet is oversubscribed by day and nights drain it, about 0.8 of the fleet over the
week, because a backlog growing all week says more about the load than the queue. The
same seed gives the same week.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import replace
from decimal import Decimal

from clusters.admission import DEV, PROD, FlavorQ, QuotaQ, TenantQ
from clusters.whatif.model import EPOCH, Demand, IdlePolicy, Workload, World
from clusters.whatif.node_domains import pool_domains

WEEK = 7 * 24 * 3600.0
# The parent cohort of the synthetic world's two cohorts (the planner and the benchmark).
PARENT = "platform"
TENANTS = 10
H100_NODES, L4_NODES = 64, 32
# The H100 pool's network, as kubesim/fleets/large.yaml labels it: blocks of 32 nodes,
# racks of 8 (docs/topology.md).
BLOCK = "network.topology.kubernetes.io/block"
RACK = "network.topology.kubernetes.io/rack"
H100_TOPOLOGY = ((BLOCK, 32), (RACK, 8))


def large_fleet(*, tenants: int = TENANTS, scale: float = 1.0, parent: str | None = None) -> World:
    """Kubesim's large fleet (times ``scale`` nodes) with ``tenants`` tenants in two cohorts:
    isolated (each lends only within itself), or both under the cohort ``parent``, so that
    what one leaves unused the other may borrow and reclaims go across the tree."""
    h100_nodes = max(round(H100_NODES * scale), 1)
    l4_nodes = max(round(L4_NODES * scale), 1)
    topology = tuple(key for key, _ in H100_TOPOLOGY)
    flavors = [FlavorQ("h100", 8, h100_nodes, topology=topology), FlavorQ("l4", 1, l4_nodes)]
    slugs = [f"team{i:02d}" for i in range(tenants)]
    weights = {slug: Decimal(1 + i % 3) for i, slug in enumerate(slugs)}
    cohorts = {slug: f"cohort{i % 2}" for i, slug in enumerate(slugs)}
    quotas: list[QuotaQ] = []
    for cohort in sorted(set(cohorts.values())):
        members = [s for s in slugs if cohorts[s] == cohort]
        total_weight = sum(weights[s] for s in members)
        share = len(members) / len(slugs)
        for flavor in flavors:
            pool = flavor.total_gpus * share
            given = 0
            for n, slug in enumerate(members):
                if n == len(members) - 1:
                    gpus = round(pool) - given
                else:
                    gpus = int(pool * float(weights[slug] / total_weight))
                given += gpus
                quotas.append(QuotaQ(slug, flavor.name, gpus, borrow_limit=max(gpus, 1)))
    return World(
        flavors=flavors,
        tenants=[TenantQ(s, cohort=cohorts[s], weight=weights[s]) for s in slugs],
        quotas=quotas,
        idle={s: IdlePolicy(minutes=60, grace_minutes=15) for s in slugs},
        cohort_parents={c: parent for c in sorted(set(cohorts.values()))} if parent else {},
        node_domains={"h100": pool_domains("h100", h100_nodes, H100_TOPOLOGY)},
    )


# Arrival rate outside working hours, as a fraction of the working-hours rate, per kind of
# request: (weekday evenings and nights, weekend days 08:00-20:00, weekend nights).
RHYTHM = {
    "dev": (0.15, 0.1, 0.05),
    "job": (0.5, 0.3, 0.3),
    "prod": (0.1, 0.1, 0.1),
}
# The share of working-hours GPU-hours each kind asks for.
MIX = {"dev": 0.3, "job": 0.5, "prod": 0.2}
# Working-hours demand over the fleet (see the module's docstring).
LOAD = 1.5


def rhythm(kind: str, t: float) -> float:
    """The arrival rate of ``kind`` at ``t`` seconds into the week, over its peak rate."""
    day, second = divmod(t, 86400)
    weekday, by_day = day % 7 < 5, 8 * 3600 <= second < 20 * 3600
    if weekday and by_day:
        return 1.0
    night, weekend_day, weekend_night = RHYTHM[kind]
    if weekday:
        return night
    return weekend_day if by_day else weekend_night


def _arrivals(rng: random.Random, peak: float, seconds: float, kind: str) -> list[float]:
    """Poisson arrivals at ``peak`` per second in working hours and :func:`rhythm` times
    that otherwise (a process at the peak rate, thinned)."""
    if peak <= 0:
        return []
    times: list[float] = []
    t = 0.0
    while True:
        t += rng.expovariate(peak)
        if t >= seconds:
            return times
        if rng.random() < rhythm(kind, t):
            times.append(t)


def synthetic_week(
    world: World,
    *,
    seed: int = 19,
    load: float = LOAD,
    seconds: float = WEEK,
    topology_level: str = "",
) -> Workload:
    """A seeded week of requests on ``world`` (see the module's docstring); with
    ``topology_level``, every production gang of more than one node requires one domain
    of that level (the same draws: the same week otherwise)."""
    rng = random.Random(seed)
    h100 = next(f for f in world.flavors if f.name == "h100")
    fleet_gpus = sum(f.total_gpus for f in world.flavors)
    total_weight = float(sum(t.weight for t in world.tenants))
    demands: list[Demand] = []
    ids = iter(range(1, 10_000_000))
    for tenant in world.tenants:
        # GPU-seconds asked for per second of working hours.
        peak = fleet_gpus * load * float(tenant.weight) / total_weight
        owners = list(range(1, 9))
        # GPU-seconds per request on average: dev 4.5 GPUs x ~3.5 h held, jobs 20 GPUs x
        # 5.5 h, prod 2.5 nodes x 2 days.
        dev_rate = MIX["dev"] * peak / (4.5 * 3.5 * 3600)
        job_rate = MIX["job"] * peak / (20 * 5.5 * 3600)
        prod_rate = MIX["prod"] * peak / (2.5 * h100.gpus_per_node * 2 * 86400)
        for t in _arrivals(rng, dev_rate, seconds, "dev"):
            hold = min(rng.expovariate(1 / (4 * 3600)), 3 * 86400)
            busy = hold * rng.uniform(0.2, 1.0) if rng.random() < 0.6 else None
            flavors: tuple[str, ...] = ("h100",)
            roll = rng.random()
            if roll < 0.25:
                flavors = ("h100", "l4")
            elif roll < 0.35:
                flavors = ("l4", "h100")
            demands.append(
                Demand(
                    id=next(ids),
                    tenant=tenant.slug,
                    owner=rng.choice(owners),
                    kind=DEV,
                    flavors=flavors,
                    workers=rng.randint(1, 8),
                    arrival=t,
                    hold=hold,
                    busy=busy,
                    ttl=8 * 3600.0,
                )
            )
        # Jobs and prod services differ only in their draws; the job stream is drawn
        # first so that a seed keeps giving the same week.
        batches: tuple[tuple[str, float, str, Callable[[], int], tuple[int, int, int]], ...] = (
            ("job", job_rate, DEV, lambda: rng.choice([8, 16, 24, 32]), (1, 10, 3600)),
            ("prod", prod_rate, PROD, lambda: rng.randint(1, 4), (1, 3, 86400)),
        )
        for stream, rate, kind, draw_workers, (low, high, unit) in batches:
            for t in _arrivals(rng, rate, seconds, stream):
                demands.append(
                    Demand(
                        id=next(ids),
                        tenant=tenant.slug,
                        owner=rng.choice(owners),
                        kind=kind,
                        flavors=("h100",),
                        workers=draw_workers(),
                        arrival=t,
                        hold=rng.uniform(low, high) * unit,
                        job=stream == "job",
                    )
                )
    if topology_level:
        demands = [
            replace(d, topology_level=topology_level, topology_mode="required")
            if d.kind == PROD and d.workers > 1
            else d
            for d in demands
        ]
    demands.sort(key=lambda d: (d.arrival, d.id))
    days = seconds / 86400
    span = "1 day" if days == 1 else f"{days:g} days"
    wish = f", multi-node prod in one {topology_level.rsplit('/', 1)[-1]}" if topology_level else ""
    label = f"synthetic, {span}, seed {seed}, load {load}{wish}"
    return Workload(EPOCH, seconds, demands, label=label)


# How the synthetic runs checkpoint (clusters/whatif/preemption.py): batch jobs every
# hour of work and production gangs (training that runs for days) every two, saving in
# three and five minutes on notice; dev clusters are interactive and carry no work.
CHECKPOINTS = {"job": (3600.0, 180.0), PROD: (7200.0, 300.0)}


def with_checkpoints(workload: Workload) -> Workload:
    """``workload`` with its batch jobs and production gangs checkpointing
    (:data:`CHECKPOINTS`); the same requests otherwise."""
    demands = []
    for d in workload.demands:
        kind = "job" if d.job else d.kind
        every, save = CHECKPOINTS.get(kind, (None, None))
        demands.append(replace(d, checkpoint_every=every, save_seconds=save))
    return replace(workload, demands=demands, label=f"{workload.label}, checkpointing")
