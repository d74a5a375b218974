"""Scenario tests for the admission pass: one per reason code, reclaim, ETA and dry-run.

Fleet and quotas (``helpers``): 4 nodes x 8 H100 and 4 x 1 L4; acme has 16
H100 (no borrowing) and 2 L4; globex has 16 H100 and may borrow 8; both in one cohort.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from decimal import Decimal

import pytest

from clusters.admission import (
    CAPACITY,
    COHORT_QUOTA,
    HEAD_OF_LINE,
    RECLAIM_PENDING,
    TENANT_QUOTA,
    USER_CAP,
    Decision,
    FlavorQ,
    QuotaQ,
    Snapshot,
    TenantQ,
    decide,
    dry_run,
    format_eta,
)
from clusters.admission.eta import _simulate
from tests.clusters.admission.helpers import L4, NOW, minutes, pending, running, snapshot


def test_tenant_quota_says_how_much_is_used_and_when_it_frees() -> None:
    snap = snapshot(
        running=[
            running(1, "acme", 8, expires_at=NOW + minutes(40)),
            running(2, "acme", 8, expires_at=NOW + minutes(90)),
        ],
        pending=[pending(10, "acme", 8)],
    )
    status = decide(snap).waiting[10]
    assert status.reason == TENANT_QUOTA
    assert status.message == (
        "acme is using 16 of its 16 h100 GPUs and cannot borrow more: 8 more are needed."
    )
    assert status.eta == NOW + minutes(40)
    assert (status.position, status.flavor_position) == (1, 1)


def test_cohort_quota_when_the_borrower_finds_nothing_unused() -> None:
    snap = snapshot(
        running=[running(1, "acme", 16), running(2, "globex", 16)],
        pending=[pending(10, "globex", 4)],
    )
    status = decide(snap).waiting[10]
    assert status.reason == COHORT_QUOTA
    assert status.message == (
        "globex would have to borrow 4 h100 GPUs, but the default cohort has no unused "
        "h100 GPUs (all 32 are in use)."
    )
    assert status.eta is None  # the running clusters have no TTL: unknown


def test_borrowing_within_the_limit_is_admitted() -> None:
    snap = snapshot(running=[running(2, "globex", 16)], pending=[pending(10, "globex", 8)])
    decision = decide(snap)
    assert decision.admitted == [10]
    assert decision.ledger == {("globex", "h100"): Decimal(24)}


def test_capacity_when_free_gpus_are_known() -> None:
    snap = snapshot(
        flavors=[FlavorQ("h100", 8, 4, free_gpus=Decimal(4)), FlavorQ("l4", 1, 4)],
        pending=[pending(10, "acme", 8), pending(11, "acme", 4)],
    )
    decision = decide(snap)
    assert decision.admitted == [11]
    assert decision.waiting[10].reason == CAPACITY
    assert decision.waiting[10].message == (
        "No room on the fleet: 4 h100 GPUs are free and this cluster needs 8."
    )


def test_capacity_for_a_prod_cluster_needs_whole_free_nodes() -> None:
    snap = snapshot(
        flavors=[FlavorQ("h100", 8, 4, free_gpus=Decimal(16), free_nodes=1), FlavorQ("l4", 1, 4)],
        pending=[pending(10, "acme", 16, kind="prod", workers=2, worker_gpus=Decimal(8))],
    )
    status = decide(snap).waiting[10]
    assert status.reason == CAPACITY
    assert "1 h100 node is entirely free; 2 are needed" in status.message


def test_dev_requests_use_partly_used_nodes_while_an_aged_prod_cluster_waits_for_whole_ones() -> (
    None
):
    """An aged production cluster holds the flavor's capacity, but the free GPUs of
    nodes already in use are no use to it: single-GPU dev workers that fit there start;
    anything that would take from a whole free node waits behind it."""
    # 4 nodes: 1 entirely free, the others with 5 GPUs free between them (13 free).
    h100 = FlavorQ("h100", 8, 4, free_gpus=Decimal(13), free_nodes=1)
    snap = snapshot(
        flavors=[h100, L4],
        aging=minutes(20),
        quotas=[QuotaQ("acme", "h100", 32, 0), QuotaQ("globex", "h100", 32, 0)],
        pending=[
            pending(10, "acme", 16, kind="prod", workers=2, created_at=NOW - minutes(30)),
            pending(11, "globex", 4, created_at=NOW - minutes(5)),
            pending(12, "globex", 2, created_at=NOW - minutes(4)),
            pending(13, "acme", 1, created_at=NOW - minutes(3)),
            pending(14, "acme", 1, workers=1, worker_gpus=Decimal(1), created_at=NOW - minutes(2)),
        ],
    )
    decision = decide(snap)
    assert decision.waiting[10].reason == CAPACITY
    # 4 + 1 GPUs fill the partly used nodes; 12 (2 more) would need the whole free node.
    assert sorted(decision.admitted) == [11, 13]
    held = decision.waiting[12]
    assert held.reason == HEAD_OF_LINE
    assert held.message.startswith("Held behind request 10")
    assert decision.waiting[14].reason == HEAD_OF_LINE

    # A worker of two GPUs may not fit on any one partly used node: it waits too.
    two = replace(
        snap, pending=[snap.pending[0], pending(15, "globex", 2, workers=1, worker_gpus=Decimal(2))]
    )
    assert decide(two).waiting[15].reason == HEAD_OF_LINE

    # Before it has aged, the prod cluster holds nothing and best effort applies.
    fresh = decide(replace(snap, aging=minutes(60)))
    assert sorted(fresh.admitted) == [11, 12, 13, 14]


@pytest.mark.parametrize(
    ("quota", "running_kw", "pending_kw", "message"),
    [
        (
            {"cpu_quota": 512},
            {"cpu": Decimal(412)},
            {"cpu": Decimal(288)},
            "This cluster needs 288 CPU; acme has 100 of its 512 CPU unused.",
        ),
        (
            {"memory_quota_gib": 4000},
            {"memory_gib": Decimal("3599.5")},
            {"memory_gib": Decimal(1800)},
            "This cluster needs 1800 GiB of memory; acme has 400.5 of its 4000 GiB unused.",
        ),
    ],
)
def test_cpu_and_memory_quotas_say_what_is_needed_and_what_is_unused(
    quota: dict, running_kw: dict, pending_kw: dict, message: str
) -> None:
    snap = snapshot(
        tenants=[TenantQ("acme", **quota), TenantQ("globex")],
        running=[running(1, "acme", 1, **running_kw)],
        pending=[pending(10, "acme", 1, **pending_kw)],
    )
    status = decide(snap).waiting[10]
    assert (status.reason, status.message) == (TENANT_QUOTA, message)
    verdict = dry_run(replace(snap, pending=[]), pending(10, "acme", 1, **pending_kw))
    assert verdict.verdict == "will_queue"
    assert [r.message for r in verdict.reasons] == [message]


def test_user_cap_counts_running_and_admitted_in_the_same_pass() -> None:
    tenants = [TenantQ("acme", max_dev_clusters_per_user=2), TenantQ("globex")]
    snap = snapshot(
        tenants=tenants,
        running=[running(1, "acme", 1, owner=7, expires_at=NOW + minutes(30))],
        pending=[
            pending(10, "acme", 1, owner=7, created_at=NOW - minutes(3)),
            pending(11, "acme", 1, owner=7, created_at=NOW - minutes(2)),
            pending(12, "acme", 1, owner=8, created_at=NOW - minutes(1)),
        ],
    )
    decision = decide(snap)
    assert decision.admitted == [10, 12]
    status = decision.waiting[11]
    assert status.reason == USER_CAP
    assert "already runs 2 dev clusters" in status.message
    assert status.eta == NOW + minutes(30)


def test_small_request_passes_a_large_one_until_it_has_aged() -> None:
    base = dict(
        running=[running(1, "acme", 12, expires_at=NOW + minutes(40))],
        pending=[
            pending(10, "acme", 8, created_at=NOW - minutes(30)),
            pending(11, "acme", 2, created_at=NOW - minutes(5)),
        ],
    )
    fresh = decide(snapshot(**base))
    assert fresh.admitted == [11]  # best effort: the small one passes
    assert fresh.waiting[10].reason == TENANT_QUOTA

    aged = decide(snapshot(aging=minutes(20), **base))
    assert aged.admitted == []
    assert aged.waiting[10].reason == TENANT_QUOTA
    held = aged.waiting[11]
    assert held.reason == HEAD_OF_LINE
    assert held.message.startswith("Held behind request 10, which has waited 30 min")
    # Both start when the running cluster expires; the aged one goes first.
    assert aged.waiting[10].eta == NOW + minutes(40)
    assert held.eta == NOW + minutes(40)


def test_reclaim_suspends_the_borrowers_lowest_priority_newest_cluster() -> None:
    snap = snapshot(
        running=[
            running(1, "acme", 8),
            running(2, "globex", 8, priority=5, admitted_at=NOW - minutes(10)),
            running(3, "globex", 8, admitted_at=NOW - minutes(90)),
            running(4, "globex", 8, admitted_at=NOW - minutes(20)),
        ],
        pending=[pending(10, "acme", 8)],
    )
    decision = decide(snap)
    assert decision.admitted == []
    assert [r.id for r in decision.reclaim] == [4]
    reclaim = decision.reclaim[0]
    assert (reclaim.tenant, reclaim.for_tenant, reclaim.for_request) == ("globex", "acme", 10)
    assert "suspended (not deleted) in 15 min" in reclaim.message
    status = decision.waiting[10]
    assert status.reason == RECLAIM_PENDING
    assert status.eta == NOW + minutes(15)

    # A later pass, once cluster 4 was warned, keeps the same ETA (no new grace period).
    warned = [replace(r, suspend_at=NOW + minutes(15)) if r.id == 4 else r for r in snap.running]
    later = decide(replace(snap, now=NOW + minutes(5), running=warned))
    assert [r.id for r in later.reclaim] == [4]
    assert later.waiting[10].eta == NOW + minutes(15)

    # After the grace period the integrator suspends cluster 4: the next pass admits 10.
    after = [r for r in snap.running if r.id != 4]
    assert decide(replace(snap, now=NOW + minutes(15), running=after)).admitted == [10]


def test_a_second_request_reuses_the_reclaim_already_under_way() -> None:
    snap = snapshot(
        running=[
            running(1, "acme", 8),
            running(2, "globex", 16),
            running(3, "globex", 8, admitted_at=NOW - minutes(5)),
        ],
        pending=[pending(10, "acme", 4), pending(11, "acme", 4), pending(12, "acme", 4)],
    )
    decision = decide(snap)
    # 10 triggers reclaiming cluster 3 (8 GPUs); 11 fits in what that frees; 12 would
    # take acme past its 16 once 10 and 11 (promised what the reclaim frees) start: it
    # waits behind them.
    assert [r.id for r in decision.reclaim] == [3]
    assert decision.waiting[10].reason == RECLAIM_PENDING
    assert decision.waiting[11].reason == RECLAIM_PENDING
    assert decision.waiting[12].reason == HEAD_OF_LINE
    assert decision.waiting[12].message.startswith("Held behind request 10")
    assert sorted(decision.earmarked) == [10, 11]


def _next_pass(
    snap: Snapshot, decision: Decision, *, now: datetime, live: list, flavors: list
) -> Snapshot:
    """The next pass as the integrator builds it: admitted requests run, the others keep
    waiting with the earmarks the pass reported."""
    by_id = {p.id: p for p in snap.pending}
    started = [
        running(i, by_id[i].tenant, int(by_id[i].gpus), kind=by_id[i].kind)
        for i in decision.admitted
    ]
    waiting = [
        replace(p, earmarked=p.id in decision.earmarked)
        for p in snap.pending
        if p.id not in decision.admitted
    ]
    return replace(snap, now=now, running=[*live, *started], pending=waiting, flavors=flavors)


def test_reclaimed_quota_goes_to_the_request_that_triggered_the_reclaim() -> None:
    """Issue 10, item 16: globex borrows acme's H100s; acme's prod request reclaims them
    and acme's dev request, behind it, must not take them, in that pass or the next."""
    borrowers = [
        running(1, "acme", 8, kind="prod", nodes=1),
        running(2, "globex", 8, admitted_at=NOW - minutes(300)),
        running(3, "globex", 8, admitted_at=NOW - minutes(200)),
        running(4, "globex", 4, admitted_at=NOW - minutes(30)),  # borrows 4 of acme's
    ]
    prod = pending(10, "acme", 8, kind="prod", workers=1, worker_gpus=Decimal(8))
    dev = pending(11, "acme", 1, created_at=NOW - minutes(0.5))
    fleet = [FlavorQ("h100", 8, 4, free_gpus=Decimal(4), free_nodes=0), L4]
    snap = snapshot(flavors=fleet, running=borrowers, pending=[prod, dev])

    first = decide(snap)
    # The cohort (32) has 4 unused: prod needs 4 more, so globex's newest cluster is
    # reclaimed. The dev request fits the 4 unused, but taking one of them would leave
    # prod short once cluster 4 is suspended: it waits behind prod.
    assert [(r.id, r.for_request) for r in first.reclaim] == [(4, 10)]
    assert first.admitted == []
    assert first.waiting[10].reason == RECLAIM_PENDING
    assert first.waiting[11].reason == HEAD_OF_LINE
    assert first.waiting[11].message.startswith("Held behind request 10, for which h100 GPUs")
    assert first.earmarked == [10]

    # After the grace period cluster 4 is suspended. The reconciler has not seen its
    # node empty yet: 8 GPUs are free but no node is wholly free, so prod cannot start.
    # What the reclaim freed stays promised to it: dev does not take it meanwhile.
    gone = [r for r in borrowers if r.id != 4]
    fragmented = [FlavorQ("h100", 8, 4, free_gpus=Decimal(8), free_nodes=0), L4]
    second_snap = _next_pass(snap, first, now=NOW + minutes(15), live=gone, flavors=fragmented)
    second = decide(second_snap)
    assert second.admitted == []
    assert second.waiting[10].reason == CAPACITY
    assert second.waiting[11].reason == HEAD_OF_LINE
    assert second.earmarked == [10]

    # Once the node is seen free, prod starts, not dev.
    whole = [FlavorQ("h100", 8, 4, free_gpus=Decimal(8), free_nodes=1), L4]
    third_snap = _next_pass(second_snap, second, now=NOW + minutes(16), live=gone, flavors=whole)
    third = decide(third_snap)
    assert third.admitted == [10]
    assert third.earmarked == []
    assert third.ledger[("acme", "h100")] == Decimal(16)


THREE = [TenantQ("acme"), TenantQ("globex"), TenantQ("initech")]
THREE_QUOTAS = [
    QuotaQ("acme", "h100", 16),
    QuotaQ("globex", "h100", 8, 8),
    QuotaQ("initech", "h100", 8),
]


def test_another_team_does_not_take_what_is_reclaimed_for_a_request() -> None:
    """initech's request fits the cohort's 2 unused GPUs, but taking them would leave
    acme's request short once globex's cluster is suspended: it gets its own reclaim."""
    snap = snapshot(
        tenants=THREE,
        quotas=THREE_QUOTAS,
        running=[
            running(1, "acme", 8),
            running(2, "globex", 8, admitted_at=NOW - minutes(300)),
            running(3, "globex", 4, admitted_at=NOW - minutes(200)),
            running(4, "globex", 4, admitted_at=NOW - minutes(30)),
            running(5, "initech", 4),
        ],
        pending=[
            pending(10, "acme", 8, kind="prod", workers=1, worker_gpus=Decimal(8)),
            pending(11, "initech", 2, created_at=NOW - minutes(1)),
        ],
    )
    first = decide(snap)
    assert first.admitted == []
    assert [(r.id, r.for_request) for r in first.reclaim] == [(4, 10), (3, 11)]
    assert sorted(first.earmarked) == [10, 11]
    after = replace(
        snap,
        now=NOW + minutes(15),
        running=[r for r in snap.running if r.id not in (3, 4)],
        pending=[replace(p, earmarked=True) for p in snap.pending],
    )
    assert decide(after).admitted == [10, 11]


def test_another_cohort_does_not_take_the_fleet_capacity_a_reclaim_frees() -> None:
    """initech (another cohort, same flavor) could use 2 of the fleet's 4 free GPUs, but
    acme needs all 4 plus the 4 globex's cluster gives back."""
    tenants = [TenantQ("acme"), TenantQ("globex"), TenantQ("initech", cohort="other")]
    snap = snapshot(
        tenants=tenants,
        flavors=[FlavorQ("h100", 8, 5, free_gpus=Decimal(4)), L4],
        quotas=[QuotaQ("acme", "h100", 16), QuotaQ("globex", "h100", 16, 8), *THREE_QUOTAS[2:]],
        running=[
            running(1, "acme", 8),
            running(2, "globex", 16, admitted_at=NOW - minutes(300)),
            running(3, "globex", 4, admitted_at=NOW - minutes(30)),
            running(4, "initech", 4),
        ],
        pending=[
            pending(10, "acme", 8, kind="prod", workers=1, worker_gpus=Decimal(8)),
            pending(11, "initech", 2, created_at=NOW - minutes(1)),
        ],
    )
    first = decide(snap)
    assert [(r.id, r.for_request) for r in first.reclaim] == [(3, 10)]
    assert first.admitted == []
    assert first.waiting[11].reason == HEAD_OF_LINE
    assert first.waiting[11].message.startswith("Held behind request 10")


def test_the_same_team_does_not_spend_the_quota_a_reclaim_is_for() -> None:
    """globex's newest cluster (12 GPUs) frees more than acme's prod request lacks (4):
    the cohort could then hold acme's dev request too, but acme's own quota (16) could
    not, and the prod request would be left waiting."""
    snap = snapshot(
        quotas=[QuotaQ("acme", "h100", 16), QuotaQ("globex", "h100", 16, 16)],
        running=[
            running(1, "acme", 8),
            running(2, "globex", 8, admitted_at=NOW - minutes(300)),
            running(3, "globex", 12, admitted_at=NOW - minutes(30)),
        ],
        pending=[
            pending(10, "acme", 8, kind="prod", workers=1, worker_gpus=Decimal(8)),
            pending(11, "acme", 4, created_at=NOW - minutes(0.5)),
        ],
    )
    first = decide(snap)
    assert [(r.id, r.for_request) for r in first.reclaim] == [(3, 10)]
    assert first.admitted == []
    assert first.waiting[11].reason == HEAD_OF_LINE
    after = replace(
        snap,
        running=snap.running[:2],
        pending=[replace(p, earmarked=p.id in first.earmarked) for p in snap.pending],
    )
    assert decide(after).admitted == [10]


def test_no_reclaim_for_a_request_an_aged_one_holds_back() -> None:
    """acme's aged 16-GPU request waits for acme's own quota and holds it: the small one
    behind it would not start even with the cohort's GPUs back, so nobody is suspended."""
    snap = snapshot(
        aging=minutes(60),
        running=[running(1, "acme", 8), running(2, "globex", 24)],
        pending=[
            pending(10, "acme", 16, created_at=NOW - minutes(120)),
            pending(11, "acme", 4, created_at=NOW - minutes(1)),
        ],
    )
    decision = decide(snap)
    assert decision.reclaim == []
    assert decision.waiting[10].reason == TENANT_QUOTA
    assert decision.waiting[11].reason == HEAD_OF_LINE
    assert decision.waiting[11].message.startswith("Held behind request 10,")


def test_an_earmarked_request_goes_first_within_its_priority() -> None:
    """Once globex's borrowed cluster is gone, initech's request (older, and of the team
    with the lower share) would be next by fair share: acme's earmarked one goes first."""
    snap = snapshot(
        tenants=THREE,
        quotas=[
            QuotaQ("acme", "h100", 16),
            QuotaQ("globex", "h100", 8),
            QuotaQ("initech", "h100", 8, 8),
        ],
        running=[running(1, "acme", 8), running(2, "globex", 8), running(3, "initech", 8)],
        pending=[
            pending(10, "acme", 8, created_at=NOW - minutes(1), earmarked=True),
            pending(11, "initech", 8, created_at=NOW - minutes(5)),
        ],
    )
    decision = decide(snap)
    assert decision.admitted == [10]
    assert decision.waiting[11].reason == COHORT_QUOTA


def test_no_reclaim_when_nobody_borrows() -> None:
    snap = snapshot(
        quotas=[QuotaQ("acme", "h100", 16), QuotaQ("globex", "h100", 16)],
        running=[running(1, "acme", 16)],
        pending=[pending(10, "acme", 8)],
    )
    decision = decide(snap)
    assert decision.reclaim == []
    assert decision.waiting[10].reason == TENANT_QUOTA


def test_prod_before_dev_then_explicit_priority_then_fair_share() -> None:
    tenants = [TenantQ("acme"), TenantQ("globex", weight=Decimal(2))]
    snap = snapshot(
        tenants=tenants,
        quotas=[QuotaQ("acme", "h100", 32), QuotaQ("globex", "h100", 32)],
        running=[running(1, "acme", 4), running(2, "globex", 6)],
        pending=[
            pending(10, "acme", 1, created_at=NOW - minutes(9)),
            pending(11, "globex", 1, created_at=NOW - minutes(1)),
            pending(12, "acme", 1, priority=3, created_at=NOW - minutes(1)),
            pending(13, "globex", 8, kind="prod", workers=1, created_at=NOW),
        ],
    )
    # prod first; then acme's priority 3; then globex (6+8 GPUs / weight 2 = 7 < acme's
    # 4+1) ... acme at 5/1 against globex at 14/2 = 7: acme goes first.
    assert decide(snap).admitted == [13, 12, 10, 11]


def test_fair_share_prefers_the_tenant_with_the_lower_weighted_share() -> None:
    snap = snapshot(
        quotas=[QuotaQ("acme", "h100", 32), QuotaQ("globex", "h100", 32)],
        running=[running(1, "acme", 8), running(2, "globex", 2)],
        pending=[
            pending(10, "acme", 1, created_at=NOW - minutes(9)),
            pending(11, "globex", 1, created_at=NOW - minutes(1)),
        ],
    )
    assert decide(snap).admitted == [11, 10]


def test_positions_count_per_tenant_and_per_flavor() -> None:
    snap = snapshot(
        running=[running(1, "acme", 16), running(2, "globex", 24)],
        pending=[
            pending(10, "acme", 1, created_at=NOW - minutes(5)),
            pending(11, "globex", 1, created_at=NOW - minutes(4)),
            pending(12, "acme", 1, created_at=NOW - minutes(3)),
        ],
    )
    waiting = decide(snap).waiting
    # acme's share (16/32) is below globex's (24/32): both of acme's go first.
    assert list(waiting) == [10, 12, 11]
    assert [(w.position, w.flavor_position) for w in waiting.values()] == [(1, 1), (2, 2), (1, 3)]


def test_eta_is_exact_on_a_deterministic_scenario_and_the_pass_then_agrees() -> None:
    """Stated error: within one minute of the time a later pass really admits it."""
    ttl = minutes(60)
    clusters = [
        running(1, "acme", 8, expires_at=NOW + minutes(40)),
        running(2, "acme", 4, expires_at=NOW + minutes(70)),
        running(3, "acme", 4, expires_at=NOW + minutes(100)),
    ]
    queue = [
        pending(10, "acme", 8, created_at=NOW - minutes(3), ttl=ttl),
        pending(11, "acme", 8, created_at=NOW - minutes(2), ttl=ttl),
        pending(12, "acme", 4, created_at=NOW - minutes(1), ttl=ttl),
    ]
    snap = snapshot(running=clusters, pending=queue)
    etas = {rid: s.eta for rid, s in decide(snap).waiting.items()}
    assert etas == {10: NOW + minutes(40), 11: NOW + minutes(100), 12: NOW + minutes(100)}

    # Replay: a pass every minute, clusters leave at expiry, admitted ones get their TTL.
    started = {}
    live, waiting, now = list(clusters), list(queue), NOW
    while waiting and now <= NOW + minutes(200):
        live = [r for r in live if r.expires_at is None or r.expires_at > now]
        decision = decide(replace(snap, now=now, running=live, pending=waiting))
        for p in [p for p in waiting if p.id in decision.admitted]:
            started[p.id] = now
            live.append(running(p.id, p.tenant, int(p.gpus), expires_at=now + ttl))
        waiting = [p for p in waiting if p.id not in decision.admitted]
        now += minutes(1)
    for rid, eta in etas.items():
        assert eta is not None
        assert abs((started[rid] - eta).total_seconds()) <= 60


def test_eta_simulation_releases_what_requests_ahead_take_after_their_ttl() -> None:
    queue = [(1, Decimal(4), minutes(30)), (2, Decimal(4), None), (3, Decimal(9), None)]
    out = _simulate(NOW, Decimal(0), [(NOW + minutes(10), Decimal(4))], queue)
    assert out == {1: NOW + minutes(10), 2: NOW + minutes(40), 3: None}


def test_dry_run_offers_the_alternative_flavor() -> None:
    snap = snapshot(running=[running(1, "acme", 16, expires_at=NOW + minutes(40))])
    candidate = pending(99, "acme", 1, created_at=NOW)
    on_l4 = pending(98, "acme", 1, flavor="l4", created_at=NOW)
    verdict = dry_run(snap, candidate, [on_l4])
    assert verdict.verdict == "will_queue"
    assert verdict.eta == NOW + minutes(40)
    assert (verdict.position, verdict.reasons[0].code) == (1, TENANT_QUOTA)
    assert [(a.flavor, a.verdict) for a in verdict.alternatives] == [("l4", "fits_now")]
    assert verdict.summary == (
        "Starts on l4 now (1 GPU charged), or on h100 in about 40 min (1 GPU charged)."
    )
    assert verdict.headline == (
        "Will queue on h100 (1 GPU charged): #1 in acme's queue, expected to start in about 40 min."
    )
    assert verdict.alternatives[0].message == "fits now (1 GPU charged)"


def test_dry_run_fits_now_and_the_pass_admits_it() -> None:
    snap = snapshot(running=[running(1, "acme", 8)])
    candidate = pending(99, "acme", 8, created_at=NOW)
    assert dry_run(snap, candidate).verdict == "fits_now"
    assert decide(replace(snap, pending=[candidate])).admitted == [99]


@pytest.mark.parametrize(
    ("tenant", "kw", "code", "words"),
    [
        ("acme", dict(flavor="a100"), "flavor_unknown", "no GPU flavor called 'a100'"),
        ("acme", dict(worker_gpus=Decimal(9)), "node_size", "a h100 node has 8"),
        ("acme", dict(kind="prod", workers=5, gpus=40), "node_size", "the fleet has 4"),
        ("acme", dict(gpus=17), "tenant_total", "at most 16 (16 nominal"),
        ("globex", dict(flavor="l4"), "tenant_total", "globex has no quota on l4"),
        ("globex", dict(gpus=3), "user_cap", "at most 2 dev GPUs"),
    ],
)
def test_dry_run_never_fits_says_why(tenant: str, kw: dict, code: str, words: str) -> None:
    tenants = [TenantQ("acme"), TenantQ("globex", max_dev_gpus_per_user=2)]
    fields = dict(gpus=1, created_at=NOW, workers=1) | kw
    gpus = fields.pop("gpus")
    candidate = pending(99, tenant, gpus, **fields)
    verdict = dry_run(snapshot(tenants=tenants), candidate)
    assert verdict.verdict == "never_fits"
    assert verdict.reasons[0].code == code
    assert words in verdict.reasons[0].message


@pytest.mark.parametrize(
    ("delta", "text"),
    [
        (None, "unknown"),
        (minutes(0), "now"),
        (minutes(0.5), "in less than a minute"),
        (minutes(7.2), "about 8 min"),
        (minutes(41), "about 40 min"),
        (minutes(130), "about 2 h"),
        (minutes(60 * 72), "about 3 days"),
    ],
)
def test_format_eta(delta: object, text: str) -> None:
    eta = None if delta is None else NOW + delta  # type: ignore[operator]
    assert format_eta(eta, NOW) == text


def test_cohorts_under_one_parent_borrow_from_each_other_and_reclaim_across_the_tree() -> None:
    """acme (cohort research) may borrow what globex (cohort serving) leaves unused only
    once both cohorts sit under one parent; then globex, within its nominal quota, gets
    it back by a reclaim across the tree."""
    tenants = [TenantQ("acme", cohort="research"), TenantQ("globex", cohort="serving")]
    quotas = [QuotaQ("acme", "h100", 8, 16), QuotaQ("globex", "h100", 16, 0)]
    own = running(2, "acme", 4)
    big = pending(10, "acme", 8)
    apart = snapshot(tenants=tenants, quotas=quotas, pending=[big], running=[own])
    status = decide(apart).waiting[10]
    assert status.reason == COHORT_QUOTA
    assert "research cohort" in status.message

    tree = replace(apart, cohort_parents={"research": "org", "serving": "org"})
    assert decide(tree).admitted == [10]  # 8 of its own, 4 of globex's through org

    borrowed = running(1, "acme", 16, admitted_at=NOW - minutes(30))
    mine = pending(11, "globex", 12)
    back = decide(replace(tree, pending=[mine], running=[borrowed]))
    assert back.waiting[11].reason == RECLAIM_PENDING
    assert [r.id for r in back.reclaim] == [1]
    assert "org cohort" in back.waiting[11].message
    # Isolated, globex's own 16 are free: nothing to reclaim, it simply starts.
    assert decide(replace(apart, pending=[mine], running=[borrowed])).admitted == [11]


def test_a_cycle_in_the_cohort_tree_ends_the_walk() -> None:
    from clusters.admission import cohort_root

    assert cohort_root("a", {"a": "b", "b": "c"}) == "c"
    assert cohort_root("a", {}) == "a"
    assert cohort_root("a", {"a": "b", "b": "a"}) == "b"
