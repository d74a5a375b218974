"""make run's mail sink: a real SMTP server process (``python -m notifications.mailsink``)
that the delivery task mails through Django's SMTP backend; each mail becomes a file
under its directory, and the Mail page shows each user their own."""

from __future__ import annotations

import email
import email.policy
from typing import Any

import pytest
from django.test import Client

from clusters.rows.transitions import transition
from notifications import outbox, tasks
from notifications.models import Delivery, DeliveryStatus
from tests.notifications.conftest import MailSink, make_cluster

pytestmark = pytest.mark.django_db


def _dispatch_and_send() -> None:
    for pk in outbox.dispatch_pass().created:
        tasks.deliver.apply(args=[pk])


def _page(user: Any, path: str) -> tuple[int, str]:
    client = Client()
    client.force_login(user)
    response = client.get(path)
    return response.status_code, response.content.decode()


def test_a_mail_lands_in_the_sink_as_a_file_and_on_its_owners_mail_page(
    mail_sink: MailSink, acme: Any, alice: Any, bob: Any, root: Any
) -> None:
    transition(make_cluster(acme, bob, state="ready"), "failed", reason="error", message="OOM")
    _dispatch_and_send()

    row = Delivery.objects.get(channel="email")
    assert row.status == DeliveryStatus.SENT
    [kept] = mail_sink.files()
    message = email.message_from_bytes(kept.read_bytes(), policy=email.policy.default)
    assert message["X-Envelope-To"] == "bob@example.com"
    assert message["X-Gangway-Delivery"] == str(row.delivery_id)
    assert "bob-dev" in message["Subject"]
    assert "OOM" in message.get_body().get_content()

    # bob's header lists the Mail page; the mail is there, and opens.
    status, page = _page(bob, "/notifications/")
    assert status == 200 and 'href="/mail/"' in page
    status, page = _page(bob, "/mail/")
    assert status == 200 and message["Subject"] in page and f'data-mail="{kept.name}"' in page
    status, page = _page(bob, f"/mail/{kept.name}/")
    assert status == 200 and "OOM" in page and "/t/acme/clusters/bob-dev/" in page
    # Another member reads only their own mail; a platform admin reads everybody's.
    status, page = _page(alice, "/mail/")
    assert status == 200 and kept.name not in page and "No mail yet" in page
    assert _page(alice, f"/mail/{kept.name}/")[0] == 404
    status, page = _page(root, "/mail/")
    assert status == 200 and kept.name in page and "bob@example.com" in page
    # Only the names the sink gives are read.
    assert _page(root, "/mail/secret-key/")[0] == 404
    assert _page(root, "/mail/..%2Fsecret-key/")[0] == 404


def test_without_a_sink_there_is_no_mail_page(settings: Any, bob: Any) -> None:
    settings.MAIL_SINK_DIR = ""
    status, page = _page(bob, "/notifications/")
    assert status == 200 and 'href="/mail/"' not in page
    assert _page(bob, "/mail/")[0] == 404
