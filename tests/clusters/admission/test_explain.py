"""Why another tenant's request is ahead: exact sentences on small queues, each true to the
order the recorded pass produced, and queue reasons in words."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

from clusters.admission import REASONS, TenantQ
from clusters.admission.explain import explain_pair, order_notes, reason_label
from clusters.admission.recorded_pass import RecordedPass
from tests.clusters.admission.helpers import NOW, minutes, pending, running, snapshot

# acme holds 16 of the fleet's 32 H100s and may not borrow: whatever it asks for waits.
# globex holds 8 and may borrow 8, but the cohort's 32 nominal GPUs are all but used.
FULL = [running(1, "acme", 16), running(2, "globex", 8)]


def _notes(*waiting: object, viewer: str | None = None, **kw: object) -> dict[int, str]:
    recorded = RecordedPass(snapshot(running=kw.pop("running", FULL), pending=waiting, **kw))
    assert not recorded.decision.admitted  # every request here waits
    return order_notes(recorded, viewer=viewer)


def test_the_lower_weighted_share_goes_first_and_the_sentence_says_by_how_much() -> None:
    # acme asked first, but globex's share (8/32 = 0.25) is below acme's (16/32 = 0.5).
    acme = pending(10, "acme", 1, created_at=NOW - minutes(5))
    globex = pending(11, "globex", 16, created_at=NOW - minutes(1))
    recorded = RecordedPass(snapshot(running=FULL, pending=[acme, globex]))
    assert [p.id for p in recorded.items] == [11, 10]
    assert order_notes(recorded) == {
        10: "Globex is ahead: its weighted share is 0.25, acme's is 0.50."
    }


def test_the_weight_divides_the_share() -> None:
    # Both hold 16 of the 32 H100s (0.5 at weight 1); globex's weight of 4 brings its
    # share to 0.125 (shown rounded half to even), and it goes first.
    tenants = [TenantQ("acme"), TenantQ("globex", weight=Decimal(4))]
    held = [running(1, "acme", 16), running(2, "globex", 16)]
    notes = _notes(
        pending(10, "acme", 1, created_at=NOW - minutes(5)),
        pending(11, "globex", 16),
        running=held,
        tenants=tenants,
    )
    assert notes == {10: "Globex is ahead: its weighted share is 0.12, acme's is 0.50."}


def test_a_higher_priority_goes_before_a_lower_share() -> None:
    notes = _notes(pending(10, "acme", 1, priority=5), pending(11, "globex", 16))
    assert notes == {11: "Acme is ahead: higher priority (5 vs 0)."}


def test_production_goes_before_dev() -> None:
    notes = _notes(pending(10, "acme", 8, kind="prod", workers=1), pending(11, "globex", 16))
    assert notes == {11: "Acme is ahead: production requests go before dev ones."}


def test_same_priority_and_share_the_earlier_request_goes_first() -> None:
    even = [running(1, "acme", 16), running(2, "globex", 16)]
    notes = _notes(
        pending(10, "acme", 1, created_at=NOW - minutes(3)),
        pending(11, "globex", 1, created_at=NOW - minutes(2)),
        running=even,
    )
    assert notes == {11: "Acme is ahead: same priority and weighted share, asked earlier."}


def test_an_aged_request_goes_first_whatever_its_share() -> None:
    notes = _notes(
        pending(10, "acme", 1, created_at=NOW - timedelta(hours=2)),
        pending(11, "globex", 16),
    )
    assert notes == {11: "Acme is ahead: it has waited longer than 60 min, so it now goes first."}


def test_the_nearest_other_tenants_request_is_compared_and_own_requests_are_not() -> None:
    # globex, acme, acme on h100: both of acme's are behind globex's; the l4 request has
    # nobody of another tenant ahead in its flavor's queue.
    notes = _notes(
        pending(10, "acme", 1, created_at=NOW - minutes(5)),
        pending(12, "acme", 1, created_at=NOW - minutes(4)),
        pending(11, "globex", 16),
        pending(13, "acme", 4, flavor="l4", created_at=NOW - minutes(4)),
    )
    sentence = "Globex is ahead: its weighted share is 0.25, acme's is 0.50."
    assert notes == {10: sentence, 12: sentence}


def test_a_tenants_page_does_not_name_the_other_tenant() -> None:
    acme = pending(10, "acme", 1, created_at=NOW - minutes(5))
    notes = _notes(acme, pending(11, "globex", 16), viewer="acme")
    assert notes == {10: "Another team is ahead: its weighted share is 0.25, acme's is 0.50."}


def test_shares_alike_to_two_decimals_are_shown_to_four() -> None:
    ahead, behind = pending(1, "acme", 1), pending(2, "globex", 1)
    sentence = explain_pair(
        ahead,
        (0, 0, 1, 0.2501, 0.0, 1, "acme"),
        behind,
        (0, 0, 1, 0.2504, 0.0, 2, "globex"),
        aging=timedelta(hours=1),
    )
    assert sentence == "Acme is ahead: its weighted share is 0.2501, globex's is 0.2504."


def test_every_reason_code_has_words_without_underscores() -> None:
    for code in REASONS:
        assert "_" not in reason_label(code) and reason_label(code) != code
    assert reason_label("tenant_quota") == "team quota used up"
    assert reason_label("something_new") == "something new"
