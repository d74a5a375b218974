"""A running request's growth in the pure pass: queued as a gang beside its request,
admitted into the tenant's own quota or borrowed cohort quota, and the first thing a
reclaim takes back (at once, its request left running at its guaranteed size)."""

from __future__ import annotations

from dataclasses import replace

from clusters.admission import (
    COHORT_QUOTA,
    GROWTH_IDS,
    RECLAIM_PENDING,
    QuotaQ,
    Running,
    decide,
    extra_of,
)
from tests.clusters.admission.helpers import NOW, minutes, pending, running, snapshot

# acme and globex share the default cohort: 2 l4 GPUs each, acme may borrow 2 more.
QUOTAS = [QuotaQ("acme", "l4", 2, 2), QuotaQ("globex", "l4", 2, 0)]
SERVICE = 7
GROWTH = -(GROWTH_IDS + SERVICE)


def _service() -> Running:
    """acme's service at its guaranteed size: 2 prod workers of one l4 GPU each."""
    return running(SERVICE, "acme", 2, flavor="l4", kind="prod", nodes=2, reclaimable=False)


def _held_growth(gpus: int) -> Running:
    return running(GROWTH, "acme", gpus, flavor="l4", kind="prod", nodes=gpus, suspend_at=NOW)


def test_a_growth_id_names_its_request() -> None:
    assert extra_of(GROWTH) == ("growth", SERVICE)
    assert extra_of(-SERVICE) == ("surge", SERVICE)


def test_a_growth_beyond_the_tenants_quota_borrows_from_the_cohort() -> None:
    growth = pending(GROWTH, "acme", 2, flavor="l4", kind="prod")
    decision = decide(snapshot(quotas=QUOTAS, running=[_service()], pending=[growth]))
    assert decision.admitted == [GROWTH]
    assert decision.ledger[("acme", "l4")] == 4  # 2 of its own, 2 of globex's lent


def test_a_growth_past_what_it_may_borrow_waits_and_says_whose() -> None:
    growth = pending(GROWTH, "acme", 3, flavor="l4", kind="prod")
    decision = decide(snapshot(quotas=QUOTAS, running=[_service()], pending=[growth]))
    assert decision.admitted == []
    status = decision.waiting[GROWTH]
    assert status.reason == "tenant_quota" and status.position == 1


def test_a_borrowed_growth_is_reclaimed_at_once_and_its_request_is_not() -> None:
    claim = pending(20, "globex", 2, flavor="l4", kind="dev")
    snap = snapshot(
        quotas=QUOTAS,
        running=[_service(), _held_growth(2)],
        pending=[claim],
    )
    decision = decide(snap)
    assert [r.id for r in decision.reclaim] == [GROWTH]  # never the service itself
    assert "growth beyond its guaranteed size is taken back now" in decision.reclaim[0].message
    status = decision.waiting[20]
    assert status.reason == RECLAIM_PENDING and status.eta == NOW  # no grace period
    # Once the growth is given back, the claim starts; the service keeps its size.
    after = decide(replace(snap, running=[_service()], now=NOW + minutes(1)))
    assert after.admitted == [20] and after.reclaim == []


def test_a_growth_within_the_tenants_own_quota_is_not_reclaimed() -> None:
    quotas = [QuotaQ("acme", "l4", 4, 0), QuotaQ("globex", "l4", 2, 0)]
    claim = pending(20, "globex", 2, flavor="l4")
    decision = decide(
        snapshot(quotas=quotas, running=[_service(), _held_growth(2)], pending=[claim])
    )
    assert decision.reclaim == [] and decision.admitted == [20]


def test_a_waiting_growth_waits_for_the_cohort_once_its_lender_took_its_quota_back() -> None:
    growth = pending(GROWTH, "acme", 2, flavor="l4", kind="prod")
    other = running(21, "globex", 2, flavor="l4")
    decision = decide(snapshot(quotas=QUOTAS, running=[_service(), other], pending=[growth]))
    assert decision.admitted == [] and decision.reclaim == []
    assert decision.waiting[GROWTH].reason == COHORT_QUOTA
