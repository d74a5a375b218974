"""Admission per topology domain (docs/topology.md, "Admission"): a production gang that
requires a level is admitted only into one domain with a whole free node per worker,
chosen by best fit and charged there, parents included; ``preferred`` is admitted on the
flavor's room alone. Property tests over random fleets and gangs, then examples."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from datetime import timedelta
from decimal import Decimal

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusters.admission import (
    CAPACITY,
    FlavorQ,
    MemberQ,
    Pending,
    QuotaQ,
    Running,
    Snapshot,
    StockQ,
    TenantQ,
    decide,
    dry_run,
)
from clusters.admission.topology_room import FreeNodes
from tests.clusters.admission.helpers import NOW, minutes

BLOCK = "network.topology.kubernetes.io/block"
RACK = "network.topology.kubernetes.io/rack"
LEVELS = (BLOCK, RACK)
PER_NODE = 8


def _nodes(racks: dict[tuple[str, str], int]) -> tuple[tuple[str, ...], ...]:
    """Free nodes from {(block, rack): free nodes}."""
    return tuple(node for node, n in sorted(racks.items()) for _ in range(n))


def _flavor(free: tuple[tuple[str, ...], ...], *, node_count: int = 64) -> FlavorQ:
    return FlavorQ(
        "h100",
        gpus_per_node=PER_NODE,
        node_count=node_count,
        free_gpus=Decimal(len(free) * PER_NODE),
        free_nodes=len(free),
        topology=LEVELS,
        free_node_domains=free,
    )


def _gang(
    pk: int, workers: int, *, level: str = RACK, mode: str = "required", **kw: object
) -> Pending:
    kw.setdefault("created_at", NOW - minutes(100 - pk))
    return Pending(
        id=pk,
        tenant="acme",
        owner=1,
        flavor="h100",
        kind="prod",
        gpus=Decimal(workers * PER_NODE),
        workers=workers,
        worker_gpus=Decimal(PER_NODE),
        topology_level=level,
        topology_mode=mode,
        **kw,  # type: ignore[arg-type]
    )


def _snap(free: tuple[tuple[str, ...], ...], pending: list[Pending], **kw: object) -> Snapshot:
    return Snapshot(
        now=NOW,
        tenants=[TenantQ("acme")],
        flavors=[_flavor(free)],
        quotas=[QuotaQ("acme", "h100", 10_000)],
        pending=pending,
        **kw,  # type: ignore[arg-type]
    )


@st.composite
def fleets(draw: st.DrawFn) -> dict[tuple[str, str], int]:
    racks = {}
    for b in range(draw(st.integers(1, 3))):
        for r in range(draw(st.integers(1, 4))):
            racks[f"b{b}", f"b{b}-r{r}"] = draw(st.integers(0, 8))
    return racks


@st.composite
def gangs(draw: st.DrawFn) -> list[Pending]:
    return [
        _gang(
            i + 1,
            draw(st.integers(1, 10)),
            level=draw(st.sampled_from([RACK, RACK, BLOCK, ""])),
            mode=draw(st.sampled_from(["required", "required", "preferred"])),
            # Aged gangs hold the flavor's free nodes for themselves; recent ones do not.
            created_at=NOW - minutes(draw(st.sampled_from([5, 500])) - i),
        )
        for i in range(draw(st.integers(1, 8)))
    ]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(racks=fleets(), pending=gangs())
def test_a_required_gang_is_admitted_only_into_one_domain_that_holds_it_and_none_is_overcommitted(
    racks: dict[tuple[str, str], int], pending: list[Pending]
) -> None:
    decision = decide(_snap(_nodes(racks), pending))
    by_id = {p.id: p for p in pending}
    taken: dict[str, Counter[str]] = {BLOCK: Counter(), RACK: Counter()}
    rack_of_block = {rack: block for block, rack in racks}
    unpinned = 0
    for pk in decision.admitted:
        p = by_id[pk]
        domain = decision.domains.get(pk)
        if p.topology_level and p.topology_mode == "required":
            assert domain is not None, "a required gang is never admitted without a domain"
        if domain is None:
            unpinned += p.workers
            continue
        # A gang that asks no level is packed at the flavor's finest level.
        taken[p.topology_level or RACK][domain] += p.workers
    free_rack = Counter({rack: n for (_, rack), n in racks.items()})
    free_block: Counter[str] = Counter()
    for (block, _), n in racks.items():
        free_block[block] += n
    # Per rack, and per block counting the racks' gangs in it: never more than was free.
    for rack, n in taken[RACK].items():
        assert n <= free_rack[rack]
    for block in free_block:
        in_block = taken[BLOCK][block] + sum(
            n for rack, n in taken[RACK].items() if rack_of_block[rack] == block
        )
        assert in_block <= free_block[block]
    assert sum(taken[BLOCK].values()) + sum(taken[RACK].values()) + unpinned <= sum(racks.values())


@settings(max_examples=200, deadline=None)
@given(racks=fleets(), workers=st.integers(1, 10), level=st.sampled_from([RACK, BLOCK]))
def test_a_lone_gang_gets_the_best_fitting_domain_or_waits_when_none_fits(
    racks: dict[tuple[str, str], int], workers: int, level: str
) -> None:
    decision = decide(_snap(_nodes(racks), [_gang(1, workers, level=level)]))
    index = LEVELS.index(level)
    room: Counter[str] = Counter()
    for node, n in racks.items():
        if n:
            room[node[index]] += n
    fitting = sorted((n, name) for name, n in room.items() if n >= workers)
    if fitting:
        assert decision.admitted == [1]
        assert decision.domains[1] == fitting[0][1]
    else:
        assert decision.admitted == []
        assert decision.waiting[1].reason == CAPACITY


@settings(max_examples=200, deadline=None)
@given(racks=fleets(), workers=st.integers(1, 10))
def test_a_gang_that_asks_no_level_is_packed_into_the_best_fitting_rack_or_runs_anywhere(
    racks: dict[tuple[str, str], int], workers: int
) -> None:
    decision = decide(_snap(_nodes(racks), [_gang(1, workers, level="", mode="")]))
    room = Counter({rack: n for (_, rack), n in racks.items() if n})
    fitting = sorted((n, name) for name, n in room.items() if n >= workers)
    if workers > sum(room.values()):
        assert decision.admitted == []
    elif fitting:
        # Best fit at the finest level: the fullest rack that holds it, so that the
        # emptiest racks stay whole for gangs that require one.
        assert decision.admitted == [1]
        assert decision.domains[1] == fitting[0][1]
    else:
        # No rack holds it: admitted all the same (it asked nothing), packed nowhere.
        assert decision.admitted == [1]
        assert 1 not in decision.domains


def test_best_fit_leaves_the_large_rack_whole_for_the_large_gang() -> None:
    free = _nodes({("b0", "r-big"): 8, ("b0", "r-small"): 3, ("b1", "r-mid"): 5})
    decision = decide(_snap(free, [_gang(1, 3), _gang(2, 8)]))
    assert decision.admitted == [1, 2]
    assert decision.domains == {1: "r-small", 2: "r-big"}


def test_a_gang_that_fits_no_rack_waits_and_says_why() -> None:
    free = _nodes({("b0", "r1"): 5, ("b0", "r2"): 4, ("b1", "r3"): 2})
    decision = decide(_snap(free, [_gang(1, 8)]))
    status = decision.waiting[1]
    assert status.reason == CAPACITY
    assert status.message == (
        "No room in one rack: this cluster needs 8 whole nodes in one rack "
        f"({RACK}); the emptiest rack has 5 free."
    )
    # The dry-run says the same, from the same pass.
    verdict = dry_run(_snap(free, []), _gang(9, 8))
    assert verdict.verdict == "will_queue"
    assert verdict.reasons[0].message == status.message


def test_a_gang_larger_than_any_rack_never_fits_and_says_so() -> None:
    free = _nodes({("b0", "r1"): 2, ("b0", "r2"): 1})
    flavor = replace(_flavor(free), largest_domains=((BLOCK, 8), (RACK, 4)))
    snap = replace(_snap(free, []), flavors=[flavor])
    verdict = dry_run(snap, _gang(9, 5))
    assert verdict.verdict == "never_fits"
    assert [(r.code, r.message) for r in verdict.reasons] == [
        (
            "node_size",
            f"It requires all 5 workers in one rack ({RACK}), and the largest rack of h100 "
            "has 4 nodes.",
        )
    ]
    # As many as the largest rack has may wait for it; so may a gang that only prefers
    # one rack, or needs one block.
    assert dry_run(snap, _gang(9, 4)).verdict == "will_queue"
    assert dry_run(snap, _gang(9, 5, mode="preferred")).verdict != "never_fits"
    assert dry_run(snap, _gang(9, 5, level=BLOCK)).verdict != "never_fits"
    # Unknown sizes (the reconciler has not seen the nodes): not judged.
    assert dry_run(_snap(free, []), _gang(9, 5)).verdict == "will_queue"


def test_a_preferred_gang_starts_on_the_flavors_room_and_is_pinned_only_where_it_fits() -> None:
    free = _nodes({("b0", "r1"): 5, ("b0", "r2"): 4})
    decision = decide(_snap(free, [_gang(1, 8, mode="preferred"), _gang(2, 1, mode="preferred")]))
    # No rack holds 8: the first spreads over both; the last free node is the second's.
    assert decision.admitted == [1, 2]
    assert 1 not in decision.domains
    assert decision.domains[2] in ("r1", "r2")
    decision = decide(_snap(free, [_gang(1, 4, mode="preferred")]))
    assert decision.domains == {1: "r2"}


def test_charging_a_block_lowers_its_racks_and_a_rack_its_block() -> None:
    free = _nodes({("b0", "r1"): 4, ("b0", "r2"): 4, ("b1", "r3"): 6})
    # 6 in one block: b1 (6 free) fits more tightly than b0 (8); then 8 in one block:
    # b0; then 1 in one rack: nothing is left anywhere.
    decision = decide(
        _snap(free, [_gang(1, 6, level=BLOCK), _gang(2, 8, level=BLOCK), _gang(3, 1)])
    )
    assert decision.domains == {1: "b1", 2: "b0"}
    assert 3 in decision.waiting
    # A rack gang first: block b0 then has 5 left, too few for 6 -> b1 again.
    decision = decide(
        _snap(free, [_gang(1, 3), _gang(2, 6, level=BLOCK), _gang(3, 6, level=BLOCK)])
    )
    assert decision.domains[1] == "r1"
    assert decision.domains[2] == "b1"
    assert 3 in decision.waiting


def test_without_known_domains_topology_is_not_checked() -> None:
    flavor = FlavorQ(
        "h100", gpus_per_node=8, node_count=4, free_gpus=Decimal(32), free_nodes=4, topology=LEVELS
    )
    snap = Snapshot(
        now=NOW,
        tenants=[TenantQ("acme")],
        flavors=[flavor],
        quotas=[QuotaQ("acme", "h100", 64)],
        pending=[_gang(1, 4)],
    )
    decision = decide(snap)
    assert decision.admitted == [1]
    assert decision.domains == {}


def test_in_a_fleet_the_domain_is_searched_member_by_member() -> None:
    # Both members have a rack "r1" of 4 free nodes: 8 by the name, but a gang never
    # spans members, so an 8-node gang waits though each member has 8 whole free nodes.
    onprem = _nodes({("b0", "r1"): 4, ("b0", "r2"): 4})
    cloud = _nodes({("b0", "r1"): 4, ("b0", "r3"): 4})
    members = [
        MemberQ(
            name,
            order=i,
            stock={"h100": StockQ("h100", 8, Decimal(64), 8, free_node_domains=nodes)},
        )
        for i, (name, nodes) in enumerate((("onprem", onprem), ("cloud", cloud)))
    ]
    both = onprem + cloud
    decision = decide(_snap(both, [_gang(1, 8)], members=members))
    assert decision.admitted == []
    assert decision.waiting[1].reason == CAPACITY
    assert (
        "onprem has no rack with 8 whole free h100 nodes (the emptiest rack has 4 free)"
        in decision.waiting[1].message
    )
    decision = decide(_snap(both, [_gang(1, 4), _gang(2, 4), _gang(3, 4)], members=members))
    assert decision.clusters == {1: "onprem", 2: "onprem", 3: "cloud"}
    assert decision.domains == {1: "r1", 2: "r2", 3: "r1"}


def test_the_eta_waits_for_a_pinned_gang_of_the_same_level_to_end() -> None:
    free = _nodes({("b0", "r1"): 5, ("b0", "r2"): 4})
    ends = NOW + timedelta(hours=3)
    holder = Running(
        id=50,
        tenant="acme",
        owner=1,
        flavor="h100",
        kind="prod",
        gpus=Decimal(24),
        nodes=3,
        expires_at=ends,
        topology_level=RACK,
        topology_domain="r1",
    )
    decision = decide(_snap(free, [_gang(1, 6)], running=[holder]))
    assert decision.waiting[1].message.startswith("No room in one rack")
    assert decision.waiting[1].eta == ends
    # A gang pinned to a block frees nodes of no rack it is known to hold: unknown.
    at_block = Running(**{**holder.__dict__, "topology_level": BLOCK, "topology_domain": "b0"})
    decision = decide(_snap(free, [_gang(1, 6)], running=[at_block]))
    assert decision.waiting[1].eta is None


def test_free_nodes_charge_the_fullest_racks_of_a_block_first() -> None:
    room = FreeNodes(LEVELS, _nodes({("b0", "r1"): 2, ("b0", "r2"): 5}))
    room.take(BLOCK, "b0", 3)
    assert room.per_domain(1) == Counter({"r2": 4})
    room.take_anywhere(1)  # where it falls is unknown: the emptiest rack loses it
    assert room.per_domain(1) == Counter({"r2": 3})
