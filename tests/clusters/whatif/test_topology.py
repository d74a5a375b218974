"""The simulator's topology (issue 48): the large fleet's H100 racks, the free nodes per
rack it shows each pass, gangs placed in the rack the decision pins them to, the blind
rule (the first whole free nodes in node order) and the stranded nodes it counts."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal
from typing import Any

import pytest

from clusters.admission import PROD, Decision, FlavorQ, QuotaQ, Snapshot, TenantQ, decide
from clusters.whatif import node_domains, simulator
from clusters.whatif.metrics import topology_figures
from clusters.whatif.model import EPOCH, Demand, Workload, World
from clusters.whatif.workload import BLOCK, RACK, large_fleet, synthetic_week


def _world() -> World:
    """Four nodes of 8 H100 in two racks of two."""
    return World(
        flavors=[FlavorQ("h100", 8, 4, topology=(RACK,))],
        tenants=[TenantQ("acme")],
        quotas=[QuotaQ("acme", "h100", 32, borrow_limit=0)],
        node_domains={"h100": node_domains.pool_domains("h100", 4, [(RACK, 2)])},
    )


def _gang(ident: int, workers: int, arrival: float, hold: float, **wish: str) -> Demand:
    return Demand(
        id=ident,
        tenant="acme",
        owner=1,
        kind=PROD,
        flavors=("h100",),
        workers=workers,
        arrival=arrival,
        hold=hold,
        **wish,
    )


def _pinning(monkeypatch: Any, seen: list[Snapshot]) -> None:
    """The product's decision, and for every admitted gang that asked for a rack the
    emptiest rack with room (as issue 48's decision pins one): the simulator's side of
    ``Decision.domains`` is tested whatever the admission pass of this build does."""

    def pinned(snapshot: Snapshot, **kwargs: Any) -> Decision:
        seen.append(snapshot)
        decision = decide(snapshot, **kwargs)
        (h100,) = snapshot.flavors
        free: dict[str, int] = {}
        for (rack,) in h100.free_node_domains or ():
            free[rack] = free.get(rack, 0) + 1
        for pending in snapshot.pending:
            if pending.id in decision.admitted and pending.topology_level:
                rack = max(sorted(free), key=lambda r: free[r])
                decision.domains[pending.id] = rack
                free[rack] -= pending.workers
        return decision

    monkeypatch.setattr(simulator, "decide", pinned)


def test_the_large_fleet_labels_its_h100s_as_kubesim_does() -> None:
    world = large_fleet()
    (h100,) = [f for f in world.flavors if f.name == "h100"]
    assert h100.topology == (BLOCK, RACK)
    domains = world.node_domains["h100"]
    assert len(domains) == 64
    assert domains[0] == ("h100-block-0", "h100-rack-0")
    assert domains[15] == ("h100-block-0", "h100-rack-1")
    assert domains[63] == ("h100-block-1", "h100-rack-7")


def test_a_pinned_gang_takes_its_rack_and_the_pass_sees_free_nodes_per_rack(
    monkeypatch: Any,
) -> None:
    seen: list[Snapshot] = []
    _pinning(monkeypatch, seen)
    # One node of rack 0 is taken first; the gang of two asks for one rack.
    workload = Workload(
        EPOCH,
        3600.0,
        [_gang(1, 1, 0.0, 3000.0), _gang(2, 2, 200.0, 1000.0, topology_level=RACK)],
    )
    outcome = simulator.simulate(_world(), workload)
    placed = {p.id: p for p in outcome.placements}
    assert placed[1].nodes == (0,)
    assert placed[2].nodes == (2, 3) and placed[2].domain == "h100-rack-1"
    # The pass that admitted it saw the three whole free nodes and their racks.
    wishes = [s for s in seen if any(p.topology_level for p in s.pending)]
    assert wishes[0].flavors[0].free_node_domains == (
        ("h100-rack-0",),
        ("h100-rack-1",),
        ("h100-rack-1",),
    )
    assert wishes[0].pending[0].topology_mode == "required"


def test_blind_gangs_take_the_first_free_nodes_and_strand_their_racks(monkeypatch: Any) -> None:
    seen: list[Snapshot] = []
    _pinning(monkeypatch, seen)
    workload = Workload(
        EPOCH,
        3600.0,
        [_gang(1, 1, 0.0, 3600.0), _gang(2, 2, 200.0, 3600.0, topology_level=RACK)],
    )
    world = _world()
    blind = simulator.simulate(world, workload, topology_aware=False)
    placed = {p.id: p for p in blind.placements}
    assert placed[2].nodes == (1, 2) and placed[2].domain == ""  # across both racks
    assert all(s.flavors[0].free_node_domains is None for s in seen)
    assert all(not p.topology_level for s in seen for p in s.pending)
    # Rack 1 holds half the gang and one free node, which no rack-wide gang can have:
    # stranded, as node 1 was beside the first gang before.
    assert blind.samples[-1].stranded == {"h100": 1}
    figures = topology_figures(world, blind, flavor="h100")
    assert (figures.gangs, figures.runs, figures.in_one_domain) == (1, 1, 0.0)
    assert figures.stranded_nodes == 1.0
    aware = topology_figures(world, simulator.simulate(world, workload), flavor="h100")
    assert (aware.gangs, aware.in_one_domain) == (1, 1.0)


def test_a_gang_that_asks_no_rack_is_packed_into_the_fullest_rack_with_room() -> None:
    # Three single-node gangs fill nodes 0, 1 and 2; the first two end, leaving rack 0
    # empty and rack 1 with one free node. The next gang asks no rack: the pass packs it
    # into rack 1 (best fit), keeping rack 0 whole; blind, it takes node 0.
    workload = Workload(
        EPOCH,
        3600.0,
        [
            _gang(1, 1, 0.0, 100.0),
            _gang(2, 1, 0.0, 100.0),
            _gang(3, 1, 0.0, 3600.0),
            _gang(4, 1, 600.0, 1000.0),
        ],
    )
    world = _world()
    aware = {p.id: p for p in simulator.simulate(world, workload).placements}
    assert [aware[i].nodes for i in (1, 2, 3)] == [(0,), (1,), (2,)]
    assert aware[4].nodes == (3,) and aware[4].domain == "h100-rack-1"
    blind = {p.id: p for p in simulator.simulate(world, workload, topology_aware=False).placements}
    assert blind[4].nodes == (0,) and blind[4].domain == ""


def test_the_synthetic_week_asks_a_rack_of_multi_node_gangs_only() -> None:
    world = large_fleet(scale=0.25)
    plain = synthetic_week(world, seed=19, seconds=2 * 86400)
    wished = synthetic_week(world, seed=19, seconds=2 * 86400, topology_level=RACK)
    assert [replace(d, topology_level="", topology_mode="") for d in wished.demands] == list(
        plain.demands
    )
    asking = [d for d in wished.demands if d.topology_level]
    assert asking and all(d.kind == PROD and d.workers > 1 for d in asking)
    assert {d.topology_mode for d in asking} == {"required"}


@pytest.mark.parametrize("nodes", [3, 6])
def test_nodes_added_by_a_what_if_have_no_rack(nodes: int) -> None:
    domains = node_domains.pool_domains("h100", 4, [(RACK, 2)])
    fitted = node_domains.fitted(domains, nodes, 1)
    assert len(fitted) == nodes and fitted[:3] == domains[:3]
    free = [Decimal(8)] * nodes
    assert node_domains.stranded_nodes(fitted, free, 8) == 0
