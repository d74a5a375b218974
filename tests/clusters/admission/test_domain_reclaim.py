"""Reclaim for a gang that requires one domain (docs/topology.md, "Reclaim frees one
domain"): the borrowers' gangs suspended for it are all pinned in one domain of its level,
which then holds it; where no domain can be freed, nothing is reclaimed and its message
says why. A property over random racks and borrowers, then examples."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from decimal import Decimal

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusters.admission import (
    COHORT_QUOTA,
    RECLAIM_PENDING,
    FlavorQ,
    Pending,
    QuotaQ,
    Running,
    Snapshot,
    TenantQ,
    decide,
)
from tests.clusters.admission.helpers import NOW, minutes

BLOCK = "network.topology.kubernetes.io/block"
RACK = "network.topology.kubernetes.io/rack"
PER_NODE = 8
RACKS = {"r0": "b0", "r1": "b0", "r2": "b1", "r3": "b1"}
NODES_PER_RACK = 4

# A rack's occupants: (gang size, pinned there or not), and the rack's free nodes last.
Rack = tuple[list[tuple[int, bool]], int]


def _gang(pk: int, workers: int, rack: str, *, pinned: bool, tenant: str = "beta") -> Running:
    return Running(
        id=pk,
        tenant=tenant,
        owner=2,
        flavor="h100",
        kind="prod",
        gpus=Decimal(workers * PER_NODE),
        nodes=workers,
        admitted_at=NOW - minutes(pk),
        topology_level=RACK if pinned else "",
        topology_domain=rack if pinned else "",
    )


def _wanting(workers: int) -> Pending:
    return Pending(
        id=1,
        tenant="acme",
        owner=1,
        flavor="h100",
        kind="prod",
        gpus=Decimal(workers * PER_NODE),
        workers=workers,
        worker_gpus=Decimal(PER_NODE),
        created_at=NOW - minutes(5),
        topology_level=RACK,
        topology_mode="required",
    )


def _snap(racks: dict[str, Rack], workers: int) -> tuple[Snapshot, list[Running]]:
    running: list[Running] = []
    free: list[tuple[str, str]] = []
    for rack, (gangs, idle) in sorted(racks.items()):
        for size, pinned in gangs:
            running.append(_gang(100 + len(running), size, rack, pinned=pinned))
        free.extend([(RACKS[rack], rack)] * idle)
    flavor = FlavorQ(
        "h100",
        gpus_per_node=PER_NODE,
        node_count=len(RACKS) * NODES_PER_RACK,
        free_gpus=Decimal(len(free) * PER_NODE),
        free_nodes=len(free),
        topology=(BLOCK, RACK),
        free_node_domains=tuple(free),
    )
    snap = Snapshot(
        now=NOW,
        tenants=[TenantQ("acme"), TenantQ("beta")],
        flavors=[flavor],
        # Together they own the fleet: what beta runs beyond 64 GPUs is acme's, borrowed.
        quotas=[QuotaQ("acme", "h100", 64), QuotaQ("beta", "h100", 64, 64)],
        running=running,
        pending=[_wanting(workers)],
    )
    return snap, running


@st.composite
def racks_of_borrowers(draw: st.DrawFn) -> dict[str, Rack]:
    """Each rack's nodes, every one free or in a gang of beta's (pinned there or not);
    mostly full, so that beta borrows and the cohort lacks room."""
    out: dict[str, Rack] = {}
    for rack in RACKS:
        left = NODES_PER_RACK
        gangs = []
        idle = 0
        while left:
            size = draw(st.integers(1, left))
            what = draw(st.sampled_from(["pinned", "pinned", "pinned", "unpinned", "free"]))
            if what == "free":
                idle += size
            else:
                gangs.append((size, what == "pinned"))
            left -= size
        out[rack] = (gangs, idle)
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(racks=racks_of_borrowers(), workers=st.integers(1, NODES_PER_RACK))
def test_a_reclaim_for_a_required_gang_frees_one_rack_that_then_holds_it(
    racks: dict[str, Rack], workers: int
) -> None:
    snap, running = _snap(racks, workers)
    decision = decide(snap)
    by_id = {r.id: r for r in running}
    victims = [by_id[r.id] for r in decision.reclaim if r.for_request == 1]
    free = Counter({rack: idle for rack, (_, idle) in racks.items()})
    if victims:
        domains = {(v.topology_level, v.topology_domain) for v in victims}
        assert len(domains) == 1, f"victims in several domains: {domains}"
        ((level, rack),) = domains
        assert level == RACK
        assert free[rack] + sum(v.nodes for v in victims) >= workers
        assert decision.waiting[1].reason == RECLAIM_PENDING
        return
    if 1 in decision.admitted:
        return
    # Nothing reclaimed: no rack could have been freed by suspending beta's gangs pinned
    # there while beta borrows enough for all of them to be taken back.
    borrowed = sum(r.gpus for r in running) - 64
    pinned_nodes = Counter[str]()
    for r in running:
        if r.topology_domain:
            pinned_nodes[r.topology_domain] += r.nodes
    # What the cohort (all 128 GPUs the two own) lacks for the gang.
    deficit = sum(r.gpus for r in running) + workers * PER_NODE - 128
    if deficit > 0:
        for rack in RACKS:
            gpus = pinned_nodes[rack] * PER_NODE
            could = free[rack] + pinned_nodes[rack] >= workers and gpus >= deficit
            assert not (could and borrowed >= gpus), (
                f"{rack} could have been freed, yet nothing was reclaimed"
            )


def test_the_rack_freed_is_the_one_that_costs_fewest_gpus() -> None:
    # r0: 1 free and two pinned gangs of 2 and 1 (3 nodes to take back for 4 workers);
    # r2: 2 free and one pinned gang of 2 (16 GPUs): the cheaper.
    racks: dict[str, Rack] = {
        "r0": ([(2, True), (1, True)], 1),
        "r1": ([(4, True)], 0),
        "r2": ([(2, True)], 2),
        "r3": ([(4, False)], 0),
    }
    snap, _ = _snap(racks, 4)
    decision = decide(snap)
    reclaimed = [r.id for r in decision.reclaim]
    assert len(reclaimed) == 1
    victim = next(r for r in snap.running if r.id == reclaimed[0])
    assert victim.topology_domain == "r2"
    status = decision.waiting[1]
    assert status.reason == RECLAIM_PENDING
    assert "in rack r2, which then holds all 4 of its workers" in status.message


def test_no_rack_can_be_freed_so_nothing_is_reclaimed_and_the_message_says_why() -> None:
    # beta borrows 64 GPUs, but its gangs were pinned to no rack: where their nodes are is
    # not known, so suspending them would not be sure to free one rack.
    racks: dict[str, Rack] = {
        "r0": ([(3, False)], 1),
        "r1": ([(3, False)], 1),
        "r2": ([(4, False)], 0),
        "r3": ([(4, False)], 0),
    }
    snap, _ = _snap(racks, 4)
    decision = decide(snap)
    assert decision.reclaim == []
    status = decision.waiting[1]
    assert status.reason == COHORT_QUOTA
    assert status.message == (
        "acme is within its nominal h100 quota, but other teams of the default cohort are "
        "borrowing it, and no rack would hold this cluster's 4 whole nodes even with their "
        "clusters there suspended (at most 1 in one rack), so none is reclaimed for it: it "
        "waits for nodes to free in one rack (network.topology.kubernetes.io/rack)."
    )


def test_a_gang_a_rack_already_holds_is_reclaimed_for_by_gpus_as_before() -> None:
    # r0 is free; beta's 12 other nodes plus 4 more elsewhere fill the cohort: only quota
    # is short, so any borrower may be taken back.
    racks: dict[str, Rack] = {
        "r0": ([], 4),
        "r1": ([(4, False)], 0),
        "r2": ([(4, False)], 0),
        "r3": ([(4, False)], 0),
    }
    snap, _ = _snap(racks, 4)
    snap = replace(snap, running=[*snap.running, _gang(200, 4, "r9", pinned=False)])
    decision = decide(snap)
    assert decision.reclaim, "quota alone is short: borrowers are reclaimed by GPUs"
    assert decision.waiting[1].reason == RECLAIM_PENDING
    assert "in rack" not in decision.waiting[1].message


def test_without_a_rack_wish_nothing_changes() -> None:
    racks: dict[str, Rack] = {
        "r0": ([(3, False)], 1),
        "r1": ([(3, False)], 1),
        "r2": ([(4, False)], 0),
        "r3": ([(4, False)], 0),
    }
    snap, _ = _snap(racks, 4)
    decision = decide(replace(snap, pending=[replace(_wanting(4), topology_level="")]))
    assert decision.reclaim, "a gang that asks no rack is reclaimed for by GPUs"
    assert decision.waiting[1].reason == RECLAIM_PENDING
