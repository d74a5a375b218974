"""A heavy and a light tenant sharing 16 H100 nodes for a week: the scene of issue 49's
weekly fairness goal.

Two tenants of equal weight and equal quota (64 GPUs each, each free to borrow the
other's) in one cohort; both run checkpointing training gangs (1-4 whole nodes for 2-12 h,
a checkpoint every hour, three minutes to save on notice). *heavy* asks for 1.5 times the
pool day and night; *light* asks for 1.5 times the pool in working hours only (weekdays
08:00-20:00), about half the pool over the week: heavy borrows light's quota every
night and light reclaims it every morning, and today's order looks only at what each
holds now, where usage-decayed fair share also sees what heavy held overnight. Both ask
for more than the pool: a backlog that grows all week. Seeded: the same seed gives the
same week.
"""

from __future__ import annotations

import random
from decimal import Decimal

from clusters.admission import PROD, FlavorQ, QuotaQ, TenantQ
from clusters.whatif.model import EPOCH, Demand, Workload, World
from clusters.whatif.workload import WEEK, rhythm

NODES = 16
HEAVY, LIGHT = "heavy", "light"
# Pool-multiples asked for: heavy at all hours, light in working hours.
HEAVY_LOAD, LIGHT_LOAD = 1.5, 1.5
CHECKPOINT_EVERY, SAVE_SECONDS = 3600.0, 180.0


def world() -> World:
    """The two tenants on 16 x 8 H100 (see the module's docstring); no idle policy."""
    flavor = FlavorQ("h100", 8, NODES)
    half = flavor.total_gpus // 2
    return World(
        flavors=[flavor],
        tenants=[TenantQ(HEAVY, cohort="lab"), TenantQ(LIGHT, cohort="lab")],
        quotas=[QuotaQ(t, "h100", half, borrow_limit=half) for t in (HEAVY, LIGHT)],
    )


def week(*, seed: int = 19, seconds: float = WEEK) -> Workload:
    """A seeded week of both tenants' gangs (see the module's docstring)."""
    rng = random.Random(seed)
    pool = NODES * 8
    mean_gpu_seconds = 2.5 * 8 * 7 * 3600  # 2.5 nodes x 7 h on average
    demands: list[Demand] = []
    ids = iter(range(1, 10_000_000))
    for tenant, load, working_hours in ((HEAVY, HEAVY_LOAD, False), (LIGHT, LIGHT_LOAD, True)):
        rate = pool * load / mean_gpu_seconds
        t = 0.0
        while True:
            t += rng.expovariate(rate)
            if t >= seconds:
                break
            # The "prod" rhythm is flat outside working hours; light keeps to them.
            if working_hours and rhythm("prod", t) < 1.0:
                continue
            demands.append(
                Demand(
                    id=next(ids),
                    tenant=tenant,
                    owner=rng.randint(1, 4),
                    kind=PROD,
                    flavors=("h100",),
                    workers=rng.randint(1, 4),
                    arrival=t,
                    hold=rng.uniform(2, 12) * 3600,
                    worker_gpus=Decimal(8),
                    checkpoint_every=CHECKPOINT_EVERY,
                    save_seconds=SAVE_SECONDS,
                )
            )
    demands.sort(key=lambda d: (d.arrival, d.id))
    return Workload(EPOCH, seconds, demands, label=f"heavy and light, seed {seed}")
