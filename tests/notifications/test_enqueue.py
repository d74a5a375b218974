"""Work for the notification tasks (notifications.enqueue), on the real Redis broker: a
queue of the test's own that no worker reads. Nothing is sent before the commit, and
however many events ask, one dispatch pass is pending at a time."""

from __future__ import annotations

from django.db import transaction

from notifications import enqueue
from tests.clusters.conftest import Broker, broker

__all__ = ["broker"]  # a fixture, used by name


def test_dispatch_waits_for_the_commit_and_is_coalesced(broker: Broker) -> None:
    with transaction.atomic():
        for _ in range(20):
            enqueue.dispatch_after_commit()
        assert broker.tasks(enqueue.DISPATCH) == []
    assert len(broker.tasks(enqueue.DISPATCH)) == 1
    enqueue.dispatch_more()  # still pending: nothing more is sent
    assert len(broker.tasks(enqueue.DISPATCH)) == 1


def test_a_started_pass_lets_the_next_events_ask_again(broker: Broker) -> None:
    enqueue.dispatch_more()
    enqueue.dispatch_started()
    enqueue.dispatch_again()
    sent = broker.tasks(enqueue.DISPATCH)
    assert len(sent) == 2
    # The one asked again after a busy pass waits a moment; the first went at once.
    assert sorted(m["headers"].get("eta") is None for m in sent) == [False, True]


def test_each_delivery_is_sent_once_after_the_commit(broker: Broker) -> None:
    with transaction.atomic():
        enqueue.deliver_after_commit([11, 12])
        assert broker.tasks(enqueue.DELIVER) == []
    assert sorted(m["headers"]["argsrepr"] for m in broker.tasks(enqueue.DELIVER)) == [
        "(11,)",
        "(12,)",
    ]
