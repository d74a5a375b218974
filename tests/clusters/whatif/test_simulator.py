"""The what-if simulator, pure: deterministic under a seed, exact on a hand-checked week.

Runtime: about 8 s on an idle 2-CPU machine (the determinism check simulates six hours
of a quarter of the large fleet twice, and once with another seed; the pinned run a day
of it under each of the three policies).
"""

from __future__ import annotations

import hashlib
from decimal import Decimal

import pytest

from clusters.admission import DEV, FlavorQ, QuotaQ, TenantQ
from clusters.whatif.metrics import figures, jain, percentile
from clusters.whatif.model import (
    EPOCH,
    FIFO,
    NO_RECLAIM,
    POLICY,
    Demand,
    IdlePolicy,
    Workload,
    World,
)
from clusters.whatif.simulator import simulate
from clusters.whatif.workload import large_fleet, synthetic_week


def _fingerprint(world: World, seed: int) -> list[tuple[int, float, float | None, str, float]]:
    workload = synthetic_week(world, seed=seed, load=1.2, seconds=6 * 3600)
    outcome = simulate(world, workload, mode=POLICY)
    return [
        (r.demand.id, r.wait, r.started, r.flavor, r.gpu_seconds)
        for r in sorted(outcome.records.values(), key=lambda r: r.demand.id)
    ]


def test_the_same_seed_gives_the_same_run_and_another_seed_another() -> None:
    world = large_fleet(scale=0.25)
    first = _fingerprint(world, 7)
    assert first == _fingerprint(world, 7)
    assert first != _fingerprint(world, 8)
    assert any(wait > 0 for _, wait, *_ in first), "the fleet should be oversubscribed"


# One simulated day (a Monday) of a quarter of the large fleet, seed 19, the default load:
# the figures and a digest of every request's record (wait, start, flavor, GPU-seconds,
# reclaims, idle suspensions) under each policy. The simulator's speed-ups must leave them
# exactly as they are; a change that alters them on purpose updates them and says why in
# its commit.
PINNED = {
    POLICY: (
        (0.7314955358817674, 0.6481551264249061, 5272.121378050774, 26530.823780436993),
        (2, 11, 0),
        "c1bf846bbe7eda8c",
    ),
    FIFO: (
        (0.34072811627806243, 0.6334947220716203, 13492.121378050779, 54112.19807746538),
        (8, 25, 0),
        "e142fcb89a437f9e",
    ),
    NO_RECLAIM: (
        (0.7458015494159173, 0.6403514213599144, 5470.822676752073, 26530.823780436993),
        (2, 12, 0),
        "7190f1bcd6b01780",
    ),
}


@pytest.mark.parametrize("mode", list(PINNED))
def test_a_pinned_day_gives_the_same_figures(mode: str) -> None:
    world = large_fleet(scale=0.25)
    workload = synthetic_week(world, seed=19, seconds=86400)
    outcome = simulate(world, workload, mode=mode)
    f = figures(world, outcome)
    rows = [
        (r.demand.id, r.wait, r.started, r.flavor, r.gpu_seconds, r.reclaimed, r.idle_suspended)
        for r in sorted(outcome.records.values(), key=lambda r: r.demand.id)
    ]
    ratios, counts, digest = PINNED[mode]
    assert (f.allocation, f.jain, f.mean_wait, f.p95_wait) == pytest.approx(ratios, rel=1e-12)
    assert (f.starved, f.unserved, f.reclaims) == counts
    assert hashlib.sha256(repr(rows).encode()).hexdigest()[:16] == digest


def _one_node_world(idle: IdlePolicy | None = None) -> World:
    return World(
        flavors=[FlavorQ("h100", 8, 1)],
        tenants=[TenantQ("acme"), TenantQ("globex")],
        quotas=[QuotaQ("acme", "h100", 8), QuotaQ("globex", "h100", 8)],
        idle={"acme": idle} if idle else {},
    )


def _dev(ident: int, gpus: int, arrival: float, hold: float, **extra: object) -> Demand:
    return Demand(
        id=ident,
        tenant=str(extra.pop("tenant", "acme")),
        owner=1,
        kind=DEV,
        flavors=("h100",),
        workers=gpus,
        arrival=arrival,
        hold=hold,
        **extra,  # type: ignore[arg-type]
    )


def test_a_hand_checked_scenario_gives_exact_figures() -> None:
    """One node of 8 H100. A (8 GPUs) runs 0-60 min; B (4) arrives at 10 min and C (4) at
    20 min, both start when A ends at 60 min; B runs 30 min, C 60 min. The fleet is
    oversubscribed from 10 to 60 min (demand 16, then 12, over 8), all of it held."""
    workload = Workload(
        EPOCH,
        3 * 3600,
        [_dev(1, 8, 0, 3600), _dev(2, 4, 600, 1800), _dev(3, 4, 1200, 3600)],
    )
    world = _one_node_world()
    outcome = simulate(world, workload, mode=POLICY, pass_seconds=60)
    waits = {i: r.wait for i, r in outcome.records.items()}
    assert waits == {1: 0.0, 2: 3000.0, 3: 2400.0}
    assert {i: r.started for i, r in outcome.records.items()} == {1: 0.0, 2: 3600.0, 3: 3600.0}
    f = figures(world, outcome)
    assert f.allocation == 1.0
    assert f.oversubscribed_hours == pytest.approx(3000 / 3600)
    assert f.mean_wait == 1800.0
    assert f.p95_wait == 3000.0
    assert f.gpu_hours == 8 + 2 + 4
    assert (f.starved, f.unserved, f.reclaims) == (0, 0, 0)
    # One tenant waits: nobody to be unfair to.
    assert f.jain is None


def test_an_idle_cluster_is_suspended_after_its_idle_time_and_grace() -> None:
    """Used for 10 min of its 2 h, with a 30 min idle limit and 15 min of grace: suspended
    at 55 min, giving back 65 min of 2 GPUs; without idle suspension it holds them all."""
    world = _one_node_world(IdlePolicy(minutes=30, grace_minutes=15))
    workload = Workload(EPOCH, 3 * 3600, [_dev(1, 2, 0, 7200, busy=600.0)])
    ours = figures(world, simulate(world, workload, mode=POLICY, pass_seconds=60))
    assert ours.idle_reclaimed_gpu_hours == pytest.approx(2 * 65 / 60)
    assert ours.gpu_hours == pytest.approx(2 * 55 / 60)
    assert ours.idle_gpu_hours == pytest.approx(2 * 45 / 60)
    fifo = figures(world, simulate(world, workload, mode=FIFO, pass_seconds=60))
    assert fifo.idle_reclaimed_gpu_hours == 0
    assert fifo.gpu_hours == pytest.approx(4.0)


def test_fairness_compares_what_backlogged_tenants_hold_per_weight() -> None:
    assert jain([2.0, 2.0, 2.0]) == 1.0
    assert jain([1.0, 0.0]) == 0.5
    assert percentile([5.0, 1.0, 3.0, 2.0], 50) == 2.0
    # Two tenants, both waiting on one node: acme holds all 8 GPUs, globex none.
    world = _one_node_world()
    workload = Workload(
        EPOCH,
        7200,
        [
            _dev(1, 8, 0, 7200),
            _dev(2, 8, 60, 600),
            _dev(3, 8, 60, 600, tenant="globex"),
        ],
    )
    f = figures(world, simulate(world, workload, mode=POLICY, pass_seconds=60))
    assert f.jain == pytest.approx(0.5)
    assert f.allocation == 1.0
    assert Decimal(f.unserved) == 2
