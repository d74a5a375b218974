"""Placement across the members of a fleet: order, spill-over, allow-lists, cordons,
unreachable members, what a request asks for, whole gangs, and the words that say where
and why not elsewhere (clusters/admission/placement.py)."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusters.admission import (
    CAPACITY,
    FlavorQ,
    MemberQ,
    QuotaQ,
    Snapshot,
    StockQ,
    decide,
    dry_run,
)
from clusters.admission.recorded_pass import RecordedPass
from clusters.admission.snapshot import FITS_NOW, WILL_QUEUE
from tests.clusters.admission.helpers import pending, running, snapshot
from tests.clusters.admission.test_properties import snapshots

H100 = FlavorQ("h100", gpus_per_node=8, node_count=4, free_gpus=Decimal(32), free_nodes=4)


def member(name: str, order: int, free: int | None, nodes: int = 2, **kw: object) -> MemberQ:
    """A member with ``nodes`` h100 nodes of which ``free`` GPUs are free."""
    whole = None if free is None else free // 8
    stock = {"h100": StockQ("h100", nodes, None if free is None else Decimal(free), whole)}
    return MemberQ(name=name, order=order, stock=stock, **kw)  # type: ignore[arg-type]


def fleet(*members: MemberQ, **kw: object) -> Snapshot:
    return snapshot(
        flavors=[H100],
        quotas=[QuotaQ("acme", "h100", 64, 0), QuotaQ("globex", "h100", 64, 0)],
        members=list(members),
        **kw,
    )


def test_the_first_member_in_order_with_room_takes_the_gang() -> None:
    snap = fleet(member("cloud", 2, 16), member("onprem", 1, 16), pending=[pending(1, "acme", 8)])
    decision = decide(snap)
    assert decision.admitted == [1]
    assert decision.clusters == {1: "onprem"}
    assert decision.placement_notes == {1: "onprem"}


def test_it_spills_over_to_the_next_member_when_the_first_is_full() -> None:
    snap = fleet(member("onprem", 1, 0), member("cloud", 2, 16), pending=[pending(1, "acme", 8)])
    decision = decide(snap)
    assert decision.clusters == {1: "cloud"}
    assert decision.placement_notes[1] == "cloud (onprem is full)"


def test_capacity_taken_in_a_pass_is_not_offered_again() -> None:
    snap = fleet(
        member("onprem", 1, 8),
        member("cloud", 2, 8),
        pending=[pending(1, "acme", 8), pending(2, "globex", 8), pending(3, "acme", 8)],
    )
    decision = decide(snap)
    assert sorted(decision.clusters.values()) == ["cloud", "onprem"]
    assert len(decision.admitted) == 2
    (waiting,) = decision.waiting.values()
    assert waiting.reason == CAPACITY
    assert "onprem is full" in waiting.message and "cloud is full" in waiting.message


def test_a_gang_is_never_split_even_when_the_members_together_would_fit() -> None:
    # 12 GPUs free in all (8 + 4 on the fleet's figures), the gang needs 12: none has it.
    snap = fleet(
        member("onprem", 1, 8), member("cloud", 2, 4), pending=[pending(1, "acme", 12, workers=3)]
    )
    decision = decide(snap)
    assert decision.admitted == []
    status = decision.waiting[1]
    assert status.reason == CAPACITY
    assert status.message == (
        "No cluster it may use has room for the whole gang now (onprem has 8 h100 GPUs free, "
        "12 GPUs needed; cloud has 4 h100 GPUs free, 12 GPUs needed)."
    )


def test_allow_lists_cordons_and_unreachable_members_are_skipped() -> None:
    snap = fleet(
        member("private", 0, 32, tenants=frozenset({"globex"})),
        member("onprem", 1, 32, schedulable="cordoned"),
        member("east", 2, 32, reachable=False),
        member("cloud", 3, 32),
        pending=[pending(1, "acme", 8)],
    )
    decision = decide(snap)
    assert decision.clusters == {1: "cloud"}
    assert decision.placement_notes[1] == (
        "cloud (private is not open to acme; onprem is cordoned; east is unreachable)"
    )
    # globex may use its own member.
    other = decide(replace(snap, pending=[pending(2, "globex", 8)]))
    assert other.clusters == {2: "private"}


def test_no_member_it_may_use_has_the_flavor() -> None:
    snap = fleet(
        member("cloud", 1, 32, tenants=frozenset({"globex"})),
        member("onprem", 2, 32, schedulable="draining"),
        pending=[pending(1, "acme", 8)],
    )
    status = decide(snap).waiting[1]
    assert status.reason == CAPACITY
    assert status.message == (
        "No cluster it may use has h100 nodes for it now "
        "(cloud is not open to acme; onprem is draining)."
    )


def test_a_wanted_cluster_or_region_is_honoured() -> None:
    snap = fleet(
        member("onprem", 1, 32, region="eu"),
        member("cloud", 2, 32, region="us"),
        pending=[
            pending(1, "acme", 8, wanted_cluster="cloud"),
            pending(2, "acme", 8, wanted_region="us"),
            pending(3, "acme", 8, wanted_region="eu"),
        ],
    )
    assert decide(snap).clusters == {1: "cloud", 2: "cloud", 3: "onprem"}
    # The wanted member is full: it waits, and the others are not offered.
    full = replace(snap, members=[member("onprem", 1, 32), member("cloud", 2, 0)])
    status = decide(replace(full, pending=[pending(1, "acme", 8, wanted_cluster="cloud")]))
    assert status.waiting[1].message == (
        "No cluster it may use has room for the whole gang now (cloud is full)."
    )


def test_a_resumed_request_goes_back_where_it_ran() -> None:
    snap = fleet(
        member("onprem", 1, 32),
        member("cloud", 2, 32),
        pending=[pending(1, "acme", 8, was_on="cloud")],
    )
    assert decide(snap).clusters == {1: "cloud"}
    # ... unless it may not: then the order decides.
    cordoned = replace(
        snap, members=[member("onprem", 1, 32), member("cloud", 2, 32, schedulable="cordoned")]
    )
    assert decide(cordoned).clusters == {1: "onprem"}


def test_a_fleet_of_one_places_everything_there_and_keeps_the_words() -> None:
    snap = fleet(member("default", 0, 32, nodes=4), pending=[pending(1, "acme", 8)])
    decision = decide(snap)
    assert decision.clusters == {1: "default"}
    assert decision.placement_notes == {}
    verdict = dry_run(snap, pending(9, "acme", 8))
    assert verdict.kube_cluster == "default"
    assert verdict.headline == "Fits now on h100: 8 GPUs charged."


def test_the_verdict_says_where_and_why_not_elsewhere() -> None:
    snap = fleet(member("onprem", 1, 0), member("cloud-h100", 2, 16))
    verdict = dry_run(snap, pending(9, "acme", 8))
    assert verdict.verdict == FITS_NOW
    assert verdict.kube_cluster == "cloud-h100"
    assert verdict.headline == "Fits now on h100 in cloud-h100 (onprem is full): 8 GPUs charged."
    # The recorded pass (the dry-run's fast path) says the same.
    fast = dry_run(snap, pending(9, "acme", 8), recorded=RecordedPass(snap))
    assert (fast.kube_cluster, fast.headline) == (verdict.kube_cluster, verdict.headline)
    waits = dry_run(
        fleet(member("onprem", 1, 32, schedulable="cordoned"), member("cloud", 2, 0)),
        pending(9, "acme", 8),
    )
    assert waits.verdict == WILL_QUEUE
    assert waits.reasons[0].message == (
        "No cluster it may use has room for the whole gang now (onprem is cordoned; cloud is full)."
    )


def test_a_production_gang_needs_whole_free_nodes_on_one_member() -> None:
    # 16 GPUs free on onprem, but scattered: only one node is wholly free.
    onprem = MemberQ("onprem", 1, stock={"h100": StockQ("h100", 2, Decimal(16), free_nodes=1)})
    snap = fleet(
        onprem,
        member("cloud", 2, 16),
        running=[running(5, "globex", 4)],
        pending=[pending(1, "acme", 16, kind="prod", workers=2)],
    )
    decision = decide(snap)
    assert decision.placement_notes[1] == "cloud (onprem has 1 whole h100 node free, 2 needed)"


def test_a_cap_on_a_member_sends_the_gang_to_the_next_member() -> None:
    caps = {("acme", "h100"): 8}
    snap = fleet(
        member("onprem", 1, 32, caps=caps),
        member("cloud", 2, 32),
        running=[running(5, "acme", 4, cluster="onprem"), running(6, "acme", 8, cluster="cloud")],
        pending=[pending(1, "acme", 8), pending(2, "globex", 8)],
    )
    decision = decide(snap)
    assert decision.clusters == {1: "cloud", 2: "onprem"}
    assert decision.placement_notes[1] == (
        "cloud (acme may hold at most 8 h100 GPUs on onprem and holds 4 there)"
    )


def test_a_gang_waits_when_every_member_would_take_its_tenant_over_a_cap() -> None:
    snap = fleet(
        member("onprem", 1, 32, caps={("acme", "h100"): 8}),
        member("cloud", 2, 32, caps={("acme", "h100"): 4}),
        pending=[pending(1, "acme", 4), pending(2, "acme", 8)],
    )
    decision = decide(snap)
    assert decision.clusters == {1: "onprem"}  # then onprem holds 4 of its 8
    waits = decision.waiting[2]
    assert waits.reason == CAPACITY
    assert waits.message == (
        "No cluster it may use has room for the whole gang now (acme may hold at most "
        "8 h100 GPUs on onprem and holds 4 there; acme may hold at most 4 h100 GPUs on cloud)."
    )
    verdict = dry_run(snap, pending(9, "acme", 4))
    assert (verdict.verdict, verdict.kube_cluster) == (FITS_NOW, "onprem")
    assert verdict.headline == "Fits now on h100 in onprem: 4 GPUs charged."


# -- property: a placement never exceeds a member's room nor lands where it may not -------


@st.composite
def fleets(draw: st.DrawFn) -> Snapshot:
    members = []
    for i, name in enumerate(("a", "b", "c")[: draw(st.integers(1, 3))]):
        free = draw(st.integers(0, 4)) * 8
        members.append(
            MemberQ(
                name,
                order=draw(st.integers(0, 3)),
                schedulable=draw(st.sampled_from(["active", "active", "cordoned", "draining"])),
                reachable=draw(st.booleans()) or i == 0,
                tenants=draw(
                    st.sampled_from([frozenset(), frozenset({"acme"}), frozenset({"globex"})])
                ),
                stock={"h100": StockQ("h100", 4, Decimal(free), free // 8)},
                caps=draw(
                    st.dictionaries(
                        st.tuples(st.sampled_from(["acme", "globex"]), st.just("h100")),
                        st.integers(0, 24),
                    )
                ),
            )
        )
    held = [
        running(100 + i, tenant, gpus, cluster=m.name)
        for i, (tenant, gpus, m) in enumerate(
            draw(
                st.lists(
                    st.tuples(
                        st.sampled_from(["acme", "globex"]),
                        st.sampled_from([1, 4, 8]),
                        st.sampled_from(members),
                    ),
                    max_size=3,
                )
            )
        )
    ]
    total = sum(m.stock["h100"].free_gpus or 0 for m in members)
    requests = [
        pending(
            i + 1,
            draw(st.sampled_from(["acme", "globex"])),
            gpus,
            kind=kind,
            workers=gpus // 8 if kind == "prod" else gpus,
        )
        for i, (gpus, kind) in enumerate(
            draw(
                st.lists(
                    st.tuples(
                        st.sampled_from([1, 4, 8, 16]), st.sampled_from(["dev", "prod"])
                    ).filter(lambda t: t[1] == "dev" or t[0] % 8 == 0),
                    max_size=10,
                )
            )
        )
    ]
    flavor = replace(H100, free_gpus=Decimal(total), free_nodes=int(total // 8))
    return snapshot(
        flavors=[flavor],
        quotas=[QuotaQ("acme", "h100", 64, 0), QuotaQ("globex", "h100", 64, 0)],
        members=members,
        running=held,
        pending=requests,
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fleets())
def test_a_placement_never_exceeds_a_member_or_a_cap_nor_lands_where_it_may_not(
    snap: Snapshot,
) -> None:
    decision = decide(snap)
    by_id = {p.id: p for p in snap.pending}
    assert set(decision.clusters) == set(decision.admitted)
    for m in snap.members:
        placed = [by_id[i] for i, name in decision.clusters.items() if name == m.name]
        stock = m.stock["h100"]
        assert sum(p.gpus for p in placed) <= (stock.free_gpus or 0)
        assert sum(p.workers for p in placed if p.kind == "prod") <= (stock.free_nodes or 0)
        for p in placed:
            assert m.active and m.reachable
            assert not m.tenants or p.tenant in m.tenants
        # Never over a cap: what a tenant held there before plus what the pass placed.
        for (tenant, flavor), cap in m.caps.items():
            before = sum(r.gpus for r in snap.running if (r.cluster, r.tenant) == (m.name, tenant))
            added = sum(p.gpus for p in placed if p.tenant == tenant and p.flavor == flavor)
            assert added == 0 or before + added <= cap


def _one_member(snap: Snapshot) -> Snapshot:
    """``snap`` in a fleet of one: the member holds every flavor with the fleet's figures
    (what the integrator builds for the settings' cluster)."""
    stock = {f.name: StockQ(f.name, f.node_count, f.free_gpus, f.free_nodes) for f in snap.flavors}
    return replace(snap, members=[MemberQ("default", stock=stock)])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshots())
def test_a_fleet_of_one_decides_exactly_as_no_fleet(snap: Snapshot) -> None:
    before, after = decide(snap), decide(_one_member(snap))
    assert after.clusters == dict.fromkeys(before.admitted, "default")
    assert after.placement_notes == {}
    after.clusters = {}
    assert after == before


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshots(max_pending=10), st.data())
def test_a_fleet_of_one_gives_the_same_verdicts(snap: Snapshot, data: st.DataObject) -> None:
    if not snap.pending:
        return
    candidate = replace(data.draw(st.sampled_from(list(snap.pending))), id=99_999)
    rest = replace(snap, pending=[p for p in snap.pending if p.id != candidate.id])
    fleet = _one_member(rest)
    plain = dry_run(rest, candidate, recorded=RecordedPass(rest))
    placed = dry_run(fleet, candidate, recorded=RecordedPass(fleet))
    assert placed.kube_cluster == ("default" if plain.verdict == FITS_NOW else None)
    assert replace(placed, kube_cluster=None) == plain
