"""Lending limits (Kueue's ``lendingLimit``): a tenant keeps ``gpus - lend_limit`` of its
nominal quota for itself; only the rest is the cohort's to borrow.

Fleet and quotas as in ``helpers``: acme 16 H100 (no borrowing), globex 16 H100 and may
borrow 8, one cohort.
"""

from __future__ import annotations

from decimal import Decimal

from clusters.admission import COHORT_QUOTA, RECLAIM_PENDING, QuotaQ, decide
from tests.clusters.admission.helpers import NOW, minutes, pending, running, snapshot


def quotas(acme_lends: int | None) -> list[QuotaQ]:
    return [QuotaQ("acme", "h100", 16, 0, acme_lends), QuotaQ("globex", "h100", 16, 8)]


def test_a_borrower_takes_only_what_the_lender_lends() -> None:
    snap = snapshot(
        quotas=quotas(acme_lends=4),
        running=[running(1, "globex", 16)],
        pending=[pending(10, "globex", 8), pending(11, "globex", 4)],
    )
    decision = decide(snap)
    assert decision.admitted == [11]
    status = decision.waiting[10]
    assert status.reason == COHORT_QUOTA
    assert status.message == (
        "globex would have to borrow 8 h100 GPUs, but only 4 of the default cohort's "
        "20 h100 GPUs are unused."
    )


def test_without_a_lending_limit_everything_unused_is_lent() -> None:
    snap = snapshot(
        quotas=quotas(acme_lends=None),
        running=[running(1, "globex", 16)],
        pending=[pending(10, "globex", 8)],
    )
    assert decide(snap).admitted == [10]


def test_a_lending_limit_of_zero_lends_nothing() -> None:
    snap = snapshot(
        quotas=quotas(acme_lends=0),
        running=[running(1, "globex", 16)],
        pending=[pending(10, "globex", 1)],
    )
    assert decide(snap).waiting[10].reason == COHORT_QUOTA


def test_the_kept_part_is_there_even_while_a_borrower_holds_the_lent_part() -> None:
    """globex borrows all 4 that acme lends; acme still gets the 12 it keeps at once and,
    for the 4 it lent, reclaims them from globex like any nominal quota."""
    snap = snapshot(
        quotas=quotas(acme_lends=4),
        running=[running(1, "globex", 16), running(2, "globex", 4)],
        pending=[pending(10, "acme", 12)],
    )
    decision = decide(snap)
    assert decision.admitted == [10]
    assert decision.ledger[("acme", "h100")] == Decimal(12)

    snap = snapshot(
        quotas=quotas(acme_lends=4),
        running=[
            running(1, "globex", 16),
            running(2, "globex", 4, admitted_at=NOW - minutes(5)),  # the newest: reclaimed
            running(3, "acme", 12),
        ],
        pending=[pending(10, "acme", 4)],
    )
    decision = decide(snap)
    assert decision.waiting[10].reason == RECLAIM_PENDING
    assert [r.id for r in decision.reclaim] == [2]
