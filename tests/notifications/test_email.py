"""Email through Django's SMTP backend to a real SMTP server on loopback (aiosmtpd)."""

from __future__ import annotations

import email
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from aiosmtpd.controller import Controller

from clusters.transitions import transition
from notifications import outbox, tasks
from notifications.models import Delivery, DeliveryStatus
from tests.notifications.conftest import make_cluster

pytestmark = pytest.mark.django_db


class Inbox:
    def __init__(self) -> None:
        self.messages: list[tuple[str, list[str], bytes]] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.messages.append((envelope.mail_from, list(envelope.rcpt_tos), envelope.content))
        return "250 OK"


@pytest.fixture
def smtp(fast_notify: Any) -> Iterator[tuple[Inbox, Controller]]:
    inbox = Inbox()
    with socket.socket() as probe:  # a free port (the controller checks it by connecting)
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    controller = Controller(inbox, hostname="127.0.0.1", port=port)
    controller.start()
    fast_notify.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    fast_notify.EMAIL_HOST = "127.0.0.1"
    fast_notify.EMAIL_PORT = port
    fast_notify.EMAIL_USE_TLS = False
    fast_notify.DEFAULT_FROM_EMAIL = "gangway@example.com"
    try:
        yield inbox, controller
    finally:
        controller.stop()


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
