"""Email through Django's SMTP backend to a real SMTP server on loopback (aiosmtpd)."""

from __future__ import annotations

import email
from collections.abc import Iterator
from typing import Any

import pytest
from aiosmtpd.controller import Controller

from clusters.rows.transitions import transition
from notifications import outbox, tasks
from notifications.models import Delivery, DeliveryStatus
from tests.mail_server import Inbox, smtp_server
from tests.notifications.conftest import make_cluster

pytestmark = pytest.mark.django_db


@pytest.fixture
def smtp(fast_notify: Any) -> Iterator[tuple[Inbox, Controller]]:
    with smtp_server(fast_notify) as server:
        fast_notify.DEFAULT_FROM_EMAIL = "gangway@example.com"
        yield server


def test_a_failed_cluster_is_mailed_to_its_owner(
    smtp: tuple[Inbox, Controller], acme: Any, bob: Any
) -> None:
    inbox, _ = smtp
    cluster = make_cluster(acme, bob, state="ready")
    transition(cluster, "failed", reason="error", message="image pull failed")
    for pk in outbox.dispatch_pass().created:
        tasks.deliver.apply(args=[pk])
    assert len(inbox.messages) == 1
    sender, rcpts, raw = inbox.messages[0]
    assert (sender, rcpts) == ("gangway@example.com", ["bob@example.com"])
    message = email.message_from_bytes(raw)
    assert "bob-dev" in message["Subject"]
    row = Delivery.objects.get()
    assert message["X-Gangway-Delivery"] == str(row.delivery_id)
    body = message.get_payload(decode=True).decode()
    assert "image pull failed" in body and "/t/acme/clusters/bob-dev/" in body
    assert row.status == DeliveryStatus.SENT


def test_a_mail_server_that_is_down_is_retried(
    smtp: tuple[Inbox, Controller], settings: Any, acme: Any, bob: Any
) -> None:
    inbox, controller = smtp
    controller.stop()
    settings.NOTIFY_MAX_ATTEMPTS = 2
    transition(make_cluster(acme, bob, state="ready"), "failed", reason="error")
    for pk in outbox.dispatch_pass().created:
        tasks.deliver.apply(args=[pk])
    row = Delivery.objects.get()
    assert (row.status, row.attempts) == (DeliveryStatus.GAVE_UP, 2)
    assert "mail server" in row.last_error
    assert inbox.messages == []
    controller.stop = lambda: None  # type: ignore[method-assign]
