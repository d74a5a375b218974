"""What a queued request waits for, read from its row (clusters.queue.waiting): a pass's
words, a hold's, or that no pass has looked at it yet."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from clusters.admission.explain import reason_label
from clusters.domain.states import State
from clusters.queue.waiting import HELD, PENDING, PENDING_MESSAGE, waiting


def test_only_a_queued_request_waits(make_cluster: Any) -> None:
    assert waiting(make_cluster(state=State.READY)) is None


def test_before_any_pass_it_says_it_waits_for_one(make_cluster: Any) -> None:
    found = waiting(make_cluster())
    assert found is not None and not found.looked_at
    assert (found.reason, found.message, found.position) == (PENDING, PENDING_MESSAGE, None)


def test_a_pass_s_position_reason_and_message_are_shown(make_cluster: Any) -> None:
    row = make_cluster(
        queue_position=2,
        queue_flavor_position=1,
        queue_reason="quota",
        queue_message="acme is using 16 of 16 h100 GPUs.",
    )
    found = waiting(row)
    assert found is not None and found.looked_at
    assert (found.position, found.flavor_position) == (2, 1)
    assert (found.reason, found.words) == ("quota", reason_label("quota"))
    assert found.message == "acme is using 16 of 16 h100 GPUs."


def test_a_hold_wins_over_what_the_last_pass_wrote(make_cluster: Any) -> None:
    row = make_cluster(
        held_at=timezone.now(),
        hold_reason="waiting for the demo",
        queue_position=1,
        queue_reason="quota",
        queue_message="stale",
    )
    found = waiting(row)
    assert found is not None
    assert (found.reason, found.position, found.eta) == (HELD, None, None)
    assert found.message == "On hold: waiting for the demo"
