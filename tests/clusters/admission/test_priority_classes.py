"""Priority classes in the admission pass: the queue's order by class, priority
preemption of lower classes, and protection windows (docs/preemption.md).

The properties: a class shared by every request changes nothing; a victim is never
protected, never of a class equal to or above its preemptor's, and never chosen for a
request whose class may not preempt; a higher class is never passed by a lower one.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from decimal import Decimal

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusters.admission import (
    CAPACITY,
    COHORT_QUOTA,
    RECLAIM_PENDING,
    FlavorQ,
    QuotaQ,
    Snapshot,
    decide,
    dry_run,
)
from clusters.admission.explain import explain_pair
from clusters.admission.queue_order import head_key
from tests.clusters.admission.helpers import NOW, minutes, pending, running, snapshot
from tests.clusters.admission.test_properties import snapshots

URGENT = {"class_value": 1000, "class_name": "urgent", "may_preempt": True}
LOW = {"class_value": -100, "class_name": "low"}
# One h100 node, all of it free unless a running request holds it.
ONE_NODE = FlavorQ("h100", gpus_per_node=8, node_count=1, free_gpus=Decimal(0))
QUOTAS = [QuotaQ("acme", "h100", 8, 0), QuotaQ("globex", "h100", 8, 0)]


def _full(*running_requests, pending_requests=(), **kw) -> Snapshot:
    """acme and globex (8 h100 each, one cohort) on a fleet of one full h100 node."""
    kw.setdefault("flavors", [ONE_NODE])
    kw.setdefault("quotas", QUOTAS)
    return snapshot(running=list(running_requests), pending=list(pending_requests), **kw)


# -- order -----------------------------------------------------------------------------


def test_a_higher_class_goes_first_above_prod_priority_and_share() -> None:
    # acme holds nothing (share 0) and asks for a prod cluster of priority 5; globex
    # already holds 4 GPUs and asks for a dev cluster of the high class: only 4 fit.
    snap = snapshot(
        flavors=[FlavorQ("h100", 8, 1, free_gpus=Decimal(4))],
        running=[running(1, "globex", 4)],
        pending=[
            pending(10, "acme", 4, kind="prod", workers=1, worker_gpus=Decimal(4), priority=5),
            pending(11, "globex", 4, class_value=100, class_name="high"),
        ],
    )
    decision = decide(snap)
    assert decision.admitted == [11]
    assert decision.waiting[10].reason == CAPACITY


def test_within_a_tenant_the_class_goes_before_the_explicit_priority() -> None:
    snap = snapshot(
        pending=[
            pending(10, "acme", 16, priority=9, created_at=NOW - minutes(30)),
            pending(11, "acme", 16, class_value=100),
        ]
    )
    assert decide(snap).admitted == [11]


def test_a_request_without_a_class_is_in_the_class_of_value_0() -> None:
    # The default class of the database has value 0: a request of "low" goes after one
    # without a class, one of "high" before it.
    snap = snapshot(
        pending=[
            pending(10, "acme", 16, **LOW, created_at=NOW - minutes(30)),
            pending(11, "acme", 16, created_at=NOW - minutes(20)),
        ]
    )
    assert decide(snap).admitted == [11]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshots(), st.integers(-1000, 1000))
def test_one_class_for_every_request_changes_nothing(snap: Snapshot, value: int) -> None:
    shifted = replace(
        snap,
        pending=[replace(p, class_value=value) for p in snap.pending],
        running=[replace(r, class_value=value) for r in snap.running],
    )
    before, after = decide(snap), decide(shifted)
    assert after.admitted == before.admitted
    assert after.reclaim == before.reclaim
    assert after.waiting == before.waiting


# -- priority preemption ---------------------------------------------------------------


def test_an_urgent_request_preempts_the_newest_lowest_class_request() -> None:
    snap = _full(
        running(1, "acme", 4, **LOW, admitted_at=NOW - minutes(90)),
        running(2, "acme", 4, **LOW, admitted_at=NOW - minutes(30), notice_seconds=600),
        pending_requests=[pending(10, "globex", 4, **URGENT)],
    )
    decision = decide(snap)
    assert decision.admitted == []
    [taken] = decision.reclaim
    assert (taken.id, taken.cause, taken.notice_seconds) == (2, "priority", 600)
    assert (taken.for_tenant, taken.for_request) == ("globex", 10)
    assert "the urgent class" in taken.message and "stopped in 10 min" in taken.message
    status = decision.waiting[10]
    assert status.reason == RECLAIM_PENDING
    assert status.eta == NOW + timedelta(seconds=600)
    assert "being preempted" in status.message and "acme" not in status.message
    assert decision.earmarked == [10]


def test_an_earlier_warning_keeps_its_victim_and_deadline() -> None:
    warned = NOW + minutes(4)
    snap = _full(
        running(1, "acme", 4, **LOW, admitted_at=NOW - minutes(90), suspend_at=warned),
        running(2, "acme", 4, **LOW, admitted_at=NOW - minutes(30)),
        pending_requests=[pending(10, "globex", 4, **URGENT, earmarked=True)],
    )
    decision = decide(snap)
    assert [r.id for r in decision.reclaim] == [1]
    assert decision.waiting[10].eta == warned


def test_no_preemption_without_may_preempt_nor_of_an_equal_class() -> None:
    high = {"class_value": 100, "class_name": "high"}
    for running_class, pending_class in ((LOW, high), ({"class_value": 1000}, URGENT)):
        snap = _full(
            running(1, "acme", 8, **running_class),
            pending_requests=[pending(10, "globex", 4, **pending_class)],
        )
        decision = decide(snap)
        assert decision.reclaim == []
        assert decision.waiting[10].reason == CAPACITY


def test_a_preemptor_stays_within_its_tenants_quota_and_borrowing() -> None:
    snap = _full(
        running(1, "acme", 8, **LOW),
        pending_requests=[pending(10, "globex", 12, workers=12, **URGENT)],
        flavors=[FlavorQ("h100", 8, 2, free_gpus=Decimal(8))],
    )
    decision = decide(snap)
    assert decision.reclaim == []
    assert decision.waiting[10].reason == "tenant_quota"


def test_a_preemptor_takes_cohort_quota_back_from_a_lower_class() -> None:
    # Plenty of nodes, but acme's low cluster uses the cohort's 16 GPUs with globex's 8.
    snap = snapshot(
        flavors=[FlavorQ("h100", 8, 4, free_gpus=Decimal(16))],
        quotas=[QuotaQ("acme", "h100", 8, 8), QuotaQ("globex", "h100", 8, 0)],
        running=[running(1, "acme", 16, **LOW), running(2, "globex", 4)],
        pending=[pending(10, "globex", 4, **URGENT)],
    )
    decision = decide(snap)
    # acme borrows: the reclaim (cause "reclaim") comes first, no class needed.
    assert [(r.id, r.cause) for r in decision.reclaim] == [(1, "reclaim")]
    assert decision.waiting[10].reason == RECLAIM_PENDING


def test_jobs_are_victims_services_are_not() -> None:
    job = {"reclaimable": False, "preemptible": True}
    service = {"reclaimable": False, "preemptible": False}
    snap = _full(
        running(1, "acme", 4, **LOW, **service, admitted_at=NOW - minutes(5)),
        running(2, "acme", 4, **LOW, **job, admitted_at=NOW - minutes(50)),
        pending_requests=[pending(10, "globex", 4, **URGENT)],
    )
    assert [r.id for r in decide(snap).reclaim] == [2]


# -- protection windows -----------------------------------------------------------------


def test_a_protected_request_is_not_preempted_and_the_wait_says_until_when() -> None:
    ends = NOW + minutes(12)
    snap = _full(
        running(
            1,
            "acme",
            8,
            **LOW,
            name="bob-train",
            protected_until=ends,
            protected_by="min_run",
            notice_seconds=300,
        ),
        pending_requests=[pending(10, "globex", 8, **URGENT), pending(11, "acme", 8, **URGENT)],
        quotas=[QuotaQ("acme", "h100", 8, 8), QuotaQ("globex", "h100", 8, 0)],
    )
    decision = decide(snap)
    assert decision.reclaim == []
    theirs, mine = decision.waiting[10], decision.waiting[11]
    assert theirs.reason == CAPACITY
    assert theirs.eta == ends + minutes(5)
    assert theirs.message.startswith(
        "Preempts in 12 min, when the minimum run time of another team's request ends"
    )
    assert "bob-train" not in theirs.message
    # Its own tenant is told the request's name.
    assert "when bob-train's minimum run time ends" in mine.message
    assert dry_run(snap, pending(12, "globex", 8, **URGENT)).eta == ends + minutes(5)


def test_a_reclaim_waits_for_the_checkpoint_grace_of_a_borrower() -> None:
    ends = NOW + minutes(20)
    snap = snapshot(
        quotas=[QuotaQ("acme", "h100", 16, 0), QuotaQ("globex", "h100", 16, 8)],
        running=[
            running(1, "globex", 16, reclaimable=False),
            running(2, "globex", 8, protected_until=ends, protected_by="checkpoint"),
            running(3, "acme", 8),
        ],
        pending=[pending(10, "acme", 8)],
    )
    decision = decide(snap)
    assert decision.reclaim == []
    status = decision.waiting[10]
    assert status.reason == COHORT_QUOTA
    assert status.message.startswith(
        "Reclaims in 20 min, when the checkpoint grace of another team's request ends"
    )
    assert status.eta == ends + snap.reclaim_grace


def test_the_unprotected_victim_is_taken_when_it_is_enough() -> None:
    snap = _full(
        running(1, "acme", 4, **LOW, protected_until=NOW + minutes(5)),
        running(2, "acme", 4, **LOW, admitted_at=NOW - minutes(600)),
        pending_requests=[pending(10, "globex", 4, **URGENT)],
    )
    assert [r.id for r in decide(snap).reclaim] == [2]


# -- the properties of victims ----------------------------------------------------------


@st.composite
def classed(draw: st.DrawFn) -> Snapshot:
    """A random snapshot whose requests have random classes, preemption rights and
    protection windows."""
    snap = draw(snapshots(max_pending=15))
    values = st.sampled_from([-100, 0, 0, 100, 1000])

    def protection() -> dict:
        if not draw(st.booleans()):
            return {}
        return {
            "protected_until": NOW + minutes(draw(st.integers(-30, 60))),
            "protected_by": draw(st.sampled_from(["min_run", "checkpoint"])),
        }

    running_requests = [
        replace(
            r,
            class_value=draw(values),
            preemptible=draw(st.booleans()),
            reclaimable=draw(st.booleans()),
            notice_seconds=draw(st.sampled_from([None, 60, 600])),
            **protection(),
        )
        for r in snap.running
    ]
    pending_requests = [
        replace(p, class_value=draw(values), may_preempt=draw(st.booleans())) for p in snap.pending
    ]
    return replace(snap, running=running_requests, pending=pending_requests)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(classed())
def test_a_victim_is_never_protected_nor_of_a_class_its_preemptor_may_not_take(
    snap: Snapshot,
) -> None:
    decision = decide(snap)
    running_by_id = {r.id: r for r in snap.running}
    pending_by_id = {p.id: p for p in snap.pending}
    assert len({r.id for r in decision.reclaim}) == len(decision.reclaim)
    for taken in decision.reclaim:
        victim = running_by_id[taken.id]
        assert not victim.protected(NOW)
        assert victim.reclaimable or victim.preemptible
        assert taken.notice_seconds == victim.notice_seconds
        preemptor = pending_by_id[taken.for_request]
        if taken.cause == "priority":
            assert preemptor.may_preempt
            assert victim.class_value < preemptor.class_value
        else:
            assert taken.cause == "reclaim"
            assert victim.tenant != preemptor.tenant
    if not any(p.may_preempt for p in snap.pending):
        assert all(r.cause == "reclaim" for r in decision.reclaim)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(classed())
def test_a_lower_class_never_changes_what_a_higher_class_gets(snap: Snapshot) -> None:
    top = max((p.class_value for p in snap.pending), default=0)
    alone = replace(snap, pending=[p for p in snap.pending if p.class_value == top])
    admitted = set(decide(alone).admitted)
    everything = decide(snap)
    assert {i for i in everything.admitted if i in admitted} == admitted
    taken_alone = {(r.id, r.for_request) for r in decide(alone).reclaim}
    assert {(r.id, r.for_request) for r in everything.reclaim} >= taken_alone


def test_the_queue_explains_a_higher_class_first() -> None:
    aged_before = NOW - minutes(60)
    ahead = pending(10, "globex", 4, class_value=1000, class_name="urgent")
    behind = pending(11, "acme", 4, kind="prod", priority=5)
    sentence = explain_pair(
        ahead,
        head_key(ahead, aged_before, 0.5),
        behind,
        head_key(behind, aged_before, 0.0),
        aging=timedelta(hours=1),
    )
    assert sentence == "Globex is ahead: its priority class is higher (urgent vs class 0)."
    # Within one class, prod before dev is said as before.
    dev = pending(12, "globex", 4)
    assert explain_pair(
        behind,
        head_key(behind, aged_before, 0.0),
        dev,
        head_key(dev, aged_before, 0.0),
        aging=timedelta(hours=1),
    ).endswith("production requests go before dev ones.")
