"""A real Celery worker process (with beat) sends the webhook; it is SIGKILLed while the
receiver holds its answer, then started again: the delivery completes, the receiver saw
one delivery id (once or twice), and the row ends ``sent`` once.

Reuses the engine tests' worker fixture (a ``celery worker -B`` on Redis against the
test database, and kubesim for the engine's own periodic tasks).
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from clusters.rows.transitions import transition
from notifications import services
from notifications.models import Delivery, DeliveryStatus
from tests.clusters.engine.conftest import kubesim, wait_for, worker  # noqa: F401
from tests.notifications.conftest import Receiver, make_cluster

pytestmark = pytest.mark.slow


@pytest.fixture
def notify_env(monkeypatch: Any) -> None:
    """What the worker process reads: quick beats, a short send timeout (so a short
    lease), loopback receivers allowed."""
    for name, value in {
        "NOTIFY_DISPATCH_INTERVAL_SECONDS": "0.5",
        "NOTIFY_SWEEP_INTERVAL_SECONDS": "1",
        "NOTIFY_STALE_SECONDS": "1",
        "NOTIFY_WEBHOOK_TIMEOUT_SECONDS": "3",
        "EMAIL_TIMEOUT": "2",
        "NOTIFY_BACKOFF_BASE_SECONDS": "0.2",
        "NOTIFY_ALLOW_PRIVATE_WEBHOOKS": "1",
        "EMAIL_BACKEND": "django.core.mail.backends.locmem.EmailBackend",
    }.items():
        monkeypatch.setenv(name, value)


def test_a_worker_killed_mid_delivery(
    transactional_db: Any,
    notify_env: None,
    receiver: Receiver,
    acme: Any,
    alice: Any,
    bob: Any,
    request: Any,
) -> None:
    bob.email = ""  # only the tenant webhook is told
    bob.save()
    services.tenant_webhook_create(actor=alice, tenant=acme, url=receiver.url, kinds=["failed"])
    receiver.stall = threading.Event()
    proc = request.getfixturevalue("worker")

    # A cluster that fails: the engine in the worker leaves a failed row alone (a ready
    # one without a RayCluster it would recreate, and it would be ready again later).
    transition(make_cluster(acme, bob), "failed", reason="error", message="boom")
    assert receiver.arrived.wait(60), "the worker never sent the webhook"
    proc.kill()  # mid-send: the receiver has the body and has not answered
    stalled = receiver.stall
    receiver.stall = None
    stalled.set()
    row = Delivery.objects.get()
    assert (row.status, row.attempts) == (DeliveryStatus.PENDING, 1)
    assert row.lease_until is not None

    proc.start()
    wait_for(
        lambda: Delivery.objects.filter(pk=row.pk, status=DeliveryStatus.SENT).exists(),
        timeout=90,
        what="the delivery to be sent after the restart",
    )
    ids = receiver.ids()
    assert 1 <= len(ids) <= 2
    assert set(ids) == {str(row.delivery_id)}
    for got in receiver.received:
        assert got.json["delivery_id"] == str(row.delivery_id)
    assert Delivery.objects.count() == 1
    row.refresh_from_db()
    assert row.status == DeliveryStatus.SENT and row.sent_at is not None
    assert row.attempts == len(ids)
