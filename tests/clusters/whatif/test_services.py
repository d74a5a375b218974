"""The what-if planner's services (clusters.whatif.services), pure: changes read from
their text or refused with a message, applied to a copy of the world, the bounds of a
period, and a comparison on a hand-checked day with its rows and text."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from clusters.admission import FlavorQ, QuotaQ, TenantQ
from clusters.whatif.metrics import figures
from clusters.whatif.model import EPOCH, IdlePolicy, Workload, World
from clusters.whatif.services import (
    NOT_MODELLED,
    Change,
    WhatIfError,
    apply_changes,
    parse_changes,
    recorded,
    render_text,
    summary_rows,
    synthetic,
    tenant_rows,
    whatif_compare,
)
from clusters.whatif.simulator import simulate
from tests.clusters.whatif.test_simulator import _dev


def _world() -> World:
    return World(
        flavors=[FlavorQ("h100", 8, 1), FlavorQ("l4", 1, 4)],
        tenants=[TenantQ("acme"), TenantQ("globex")],
        quotas=[QuotaQ("acme", "h100", 8, lend_limit=6), QuotaQ("globex", "h100", 8)],
        idle={"globex": IdlePolicy(minutes=90, grace_minutes=5)},
    )


def test_changes_are_read_one_a_line() -> None:
    changes = parse_changes(
        ["nodes:h100=+8", "", "  quota:acme/h100=32 ", "weight:acme=1.5", "idle:*=0"]
    )
    assert changes == [
        Change("nodes", "h100", "", Decimal(8), True, "nodes:h100=+8"),
        Change("quota", "acme", "h100", Decimal(32), False, "quota:acme/h100=32"),
        Change("weight", "acme", "", Decimal("1.5"), False, "weight:acme=1.5"),
        Change("idle", "*", "", Decimal(0), False, "idle:*=0"),
    ]
    assert parse_changes(["nodes:l4=-2"])[0].value == Decimal(-2)


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("gpus:h100=8", "Cannot read the change 'gpus:h100=8': write nodes:FLAVOR=N"),
        ("quota:acme=8", "write quota:TENANT/FLAVOR=N."),
        ("weight:acme/h100=2", "write weight:NAME=N."),
        ("quota:acme/h100=+8", "Only node counts may change by +N or -N"),
        ("nodes:h100=2.5", "'nodes:h100=2.5' needs a whole number."),
        ("weight:acme=0", "A weight must be above 0"),
    ],
)
def test_a_change_it_cannot_read_is_refused_with_the_form_to_write(line: str, says: str) -> None:
    with pytest.raises(WhatIfError) as refused:
        parse_changes([line])
    assert says in str(refused.value)


def test_changes_apply_to_a_copy_of_the_world() -> None:
    world = _world()
    lines = [
        "nodes:h100=+2",
        "nodes:l4=1",
        "quota:acme/h100=4",
        "borrow:globex/l4=3",
        "weight:globex=2",
        "idle:acme=30",
    ]
    changed = apply_changes(world, parse_changes(lines))
    assert {f.name: f.node_count for f in changed.flavors} == {"h100": 3, "l4": 1}
    quotas = {(q.tenant, q.flavor): q for q in changed.quotas}
    # A lower quota lowers what it lends with it.
    assert (quotas["acme", "h100"].gpus, quotas["acme", "h100"].lend_limit) == (4, 4)
    assert (quotas["globex", "l4"].gpus, quotas["globex", "l4"].borrow_limit) == (0, 3)
    assert {t.slug: t.weight for t in changed.tenants} == {"acme": 1, "globex": 2}
    assert changed.idle["acme"] == IdlePolicy(minutes=30)
    assert changed.idle["globex"] == IdlePolicy(minutes=90, grace_minutes=5)
    # The world as it is is left as it was.
    assert [f.node_count for f in world.flavors] == [1, 4] and "acme" not in world.idle
    every = apply_changes(world, parse_changes(["idle:*=0"]))
    # Every tenant's idle time changes; a tenant's own grace is kept.
    assert every.idle == {
        "acme": IdlePolicy(minutes=0),
        "globex": IdlePolicy(minutes=0, grace_minutes=5),
    }


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("nodes:a100=+1", "No flavor called 'a100' in 'nodes:a100=+1' (known: h100, l4)."),
        ("quota:initech/h100=8", "No tenant called 'initech'"),
        ("borrow:acme/a100=8", "No flavor called 'a100'"),
        ("idle:initech=30", "No tenant called 'initech'"),
        ("nodes:h100=-2", "'nodes:h100=-2' leaves h100 with fewer than no nodes."),
    ],
)
def test_changes_to_what_the_world_lacks_are_refused(line: str, says: str) -> None:
    with pytest.raises(WhatIfError) as refused:
        apply_changes(_world(), parse_changes([line]))
    assert says in str(refused.value)


def test_a_period_out_of_bounds_is_refused() -> None:
    for days, load in ((0, 1.0), (29, 1.0), (1, 0), (1, 5.5)):
        with pytest.raises(WhatIfError):
            synthetic(seed=1, days=days, load=load)
    start = datetime(2026, 11, 2, tzinfo=UTC)
    with pytest.raises(WhatIfError, match="must end after it starts"):
        recorded(start=start, end=start)
    with pytest.raises(WhatIfError, match="at most 28 days"):
        recorded(start=start, end=start + timedelta(days=29))


def test_a_synthetic_period_is_seeded_on_the_large_fleet() -> None:
    world, workload = synthetic(seed=3, days=0.1, load=1.0)
    again = synthetic(seed=3, days=0.1, load=1.0)[1]
    assert workload.seconds == pytest.approx(0.1 * 86400)
    assert len(world.tenants) == 10 and workload.demands
    assert [(d.tenant, d.arrival) for d in workload.demands] == [
        (d.tenant, d.arrival) for d in again.demands
    ]


def test_a_node_more_removes_the_waits_of_a_hand_checked_day() -> None:
    """One node of 8 H100: A (8 GPUs) holds it 0-60 min; B and C (4 each) arrive at 10
    and 20 min and wait for it (50 and 40 min). A second node starts them at once."""
    one_node = World(
        flavors=[FlavorQ("h100", 8, 1)],
        tenants=[TenantQ("acme")],
        quotas=[QuotaQ("acme", "h100", 16)],
    )
    workload = Workload(
        EPOCH,
        3 * 3600,
        [_dev(1, 8, 0, 3600), _dev(2, 4, 600, 1800), _dev(3, 4, 1200, 3600)],
        label="a hand-checked day",
    )
    same = whatif_compare(world=one_node, workload=workload, changes=[], pass_seconds=60)
    assert same.changed is same.as_is and same.recorded == {}
    c = whatif_compare(
        world=one_node,
        workload=workload,
        changes=parse_changes(["nodes:h100=+1"]),
        pass_seconds=60,
    )
    assert (c.label, c.requests, c.days) == ("a hand-checked day", 3, 0.125)
    assert (c.as_is.mean_wait, c.as_is.p95_wait) == (1800.0, 3000.0)
    assert (c.changed.mean_wait, c.changed.p95_wait) == (0.0, 0.0)
    rows = {what: (a, b) for what, a, b in summary_rows(c)}
    assert rows["Mean wait"] == ("30 min", "0 s")
    assert rows["95th percentile wait"] == ("50 min", "0 s")
    assert rows["Never started"] == ("0", "0")
    assert rows["GPU-hours held"] == ("14", "14")
    assert tenant_rows(c) == [("acme", 3, "30 min", "0 s", "50 min", "0 s", "14", "14")]
    text = render_text(c)
    assert text.startswith("What-if over a hand-checked day: 3 requests, 0.1 days.")
    assert "Changes: nodes:h100=+1" in text
    assert all(f"- {item}" in text for item in NOT_MODELLED)
    assert "Changes: none (the world as it is, twice)" in render_text(same)


def test_a_topology_change_names_a_level_of_a_flavor_whose_nodes_the_world_places() -> None:
    (change,) = parse_changes(["topology:h100=rack"])
    assert (change.what, change.name, change.level) == ("topology", "h100", "rack")
    world, _ = synthetic(seed=3, days=0.1, load=1.0)
    changed = apply_changes(world, [change])
    assert changed.gang_topology == {"h100": "network.topology.kubernetes.io/rack"}
    assert world.gang_topology == {}
    full = parse_changes(["topology:h100=network.topology.kubernetes.io/block"])
    assert apply_changes(world, full).gang_topology["h100"].endswith("/block")
    for line, says in (
        ("topology:h100=row", "h100 has no topology level 'row'"),
        ("topology:l4=rack", "(its levels: none)"),
        ("topology:a100=rack", "No flavor called 'a100'"),
    ):
        with pytest.raises(WhatIfError) as refused:
            apply_changes(world, parse_changes([line]))
        assert says in str(refused.value)


def test_requiring_one_rack_keeps_the_synthetic_gangs_in_one_rack() -> None:
    world, workload = synthetic(seed=19, days=1, load=1.5)
    racked = apply_changes(world, parse_changes(["topology:h100=rack"]))
    racks = [values[-1] for values in world.node_domains["h100"]]
    outcome = simulate(racked, workload)
    gangs = [
        p
        for p in outcome.placements
        if outcome.records[p.id].demand.kind == "prod" and len(p.nodes) > 1
    ]
    assert gangs
    assert all({racks[n] for n in p.nodes} == {p.domain} for p in gangs)
    as_is = simulate(world, workload)
    # As it is, no gang asks for a rack: the pass only packs production gangs into one
    # (preferred), and those it packed sit there.
    packed = [p for p in as_is.placements if p.domain]
    assert packed
    for p in packed:
        demand = as_is.records[p.id].demand
        assert demand.kind == "prod" and not demand.topology_level
        assert {racks[n] for n in p.nodes} == {p.domain}
    # The planner replays that changed world beside the world as it is.
    c = whatif_compare(
        world=world, workload=workload, changes=parse_changes(["topology:h100=rack"])
    )
    assert (c.as_is, c.changed) == (figures(world, as_is), figures(racked, outcome))
