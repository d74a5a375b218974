"""The what-if planner's DRA flavors: a product's whole GPUs and MIG slices drawn from the
same DRA-managed nodes (one node pool), counted in devices as the reconciler counts them."""

from __future__ import annotations

from typing import Any

from clusters.admission import DEV, PROD, FlavorQ, QuotaQ, TenantQ
from clusters.whatif.history import world_now
from clusters.whatif.model import EPOCH, POLICY, Demand, Workload, World
from clusters.whatif.simulator import simulate
from tests.clusters.queue.dra_fleet import H100_PRODUCT, dra_flavors

POOL = f"dra:{H100_PRODUCT}"


def _world(*, shared: bool) -> World:
    """One DRA-managed H100 node: 8 whole GPUs (h100-dra) or 56 1g.10gb slices (h100-1g)."""
    return World(
        flavors=[FlavorQ("h100-1g", 56, 1), FlavorQ("h100-dra", 8, 1)],
        tenants=[TenantQ("acme")],
        quotas=[QuotaQ("acme", "h100-1g", 56), QuotaQ("acme", "h100-dra", 8)],
        shared_nodes={"h100-1g": POOL, "h100-dra": POOL} if shared else {},
    )


def _demand(ident: int, flavor: str, workers: int, arrival: float, kind: str = DEV) -> Demand:
    return Demand(
        id=ident,
        tenant="acme",
        owner=1,
        kind=kind,
        flavors=(flavor,),
        workers=workers,
        arrival=arrival,
        hold=3600.0,
    )


def _starts(world: World, demands: list[Demand]) -> dict[int, float | None]:
    outcome = simulate(world, Workload(EPOCH, 4 * 3600, demands), mode=POLICY, pass_seconds=60)
    return {i: r.started for i, r in sorted(outcome.records.items())}


def test_whole_gpus_and_slices_of_one_node_pool_take_from_each_other() -> None:
    # Four whole GPUs and 28 slices (four GPUs' worth) fill the node: the 29th slice and a
    # production worker (the whole node, 56 slices) wait for them to end at one hour.
    demands = [
        _demand(1, "h100-dra", 4, 0),
        _demand(2, "h100-1g", 28, 0),
        _demand(3, "h100-1g", 1, 120),
        _demand(4, "h100-1g", 1, 120, kind=PROD),
    ]
    shared = _starts(_world(shared=True), demands)
    assert shared[1] == 0.0 and shared[2] == 0.0
    assert shared[3] is not None and shared[3] >= 3600.0
    assert shared[4] is not None and shared[4] >= 3600.0
    # As two flavors with nodes of their own, the slice would start at once: the same
    # GPUs counted twice.
    apart = _starts(_world(shared=False), demands)
    assert apart[3] == 120.0


def test_the_world_as_it_is_shares_a_products_dra_nodes(db: Any) -> None:
    dra_flavors()
    world = world_now()
    assert world.shared_nodes == {"h100-1g": POOL, "h100-dra": POOL}
    assert {f.name: f.total_gpus for f in world.flavors} == {
        "h100": 16,
        "h100-1g": 112,
        "h100-dra": 16,
    }
