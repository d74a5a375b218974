"""Every warning a request's pages show about it is also sent to its owner.

Each warning is raised by the product's own code path (the admission pass choosing a
reclaim victim, the idle check, a tenant admin's hold), read on the page a person
would see it on, and then found in the real mail sink as a mail to the owner.
"""

from __future__ import annotations

import email
import email.policy
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from clusters.domain.states import State
from clusters.engine.idle import apply_activity
from clusters.kube.raydash import Activity
from clusters.models import ClusterRequest
from clusters.queue.admission_pass import run_admission_pass
from clusters.requests import controls, services
from clusters.rows.spec import ClusterSpec
from clusters.rows.transitions import transition
from notifications import outbox, tasks
from notifications.models import Delivery, DeliveryStatus
from tests.factories import borrower_fills_the_fleet
from tests.notifications.conftest import MailSink

pytestmark = pytest.mark.django_db


def _request(actor: Any, tenant: Any, name: str, flavor: Any, **spec: Any) -> ClusterRequest:
    fields = {"kind": "dev", "workers": 1, **spec}
    return services.cluster_request_create(
        actor=actor, tenant=tenant, spec=ClusterSpec(name=name, flavor=flavor, **fields)
    )


def _ready(row: ClusterRequest) -> ClusterRequest:
    row.refresh_from_db()
    transition(row, State.PROVISIONING, reason="applied")
    transition(row, State.READY, reason="ready", ready_at=timezone.now() - timedelta(hours=2))
    row.refresh_from_db()
    return row


def _page(user: Any, path: str) -> str:
    client = Client()
    client.force_login(user)
    response = client.get(path)
    assert response.status_code == 200
    return response.content.decode()


def _mailed(sink: MailSink, kind: str, to: str) -> str:
    """Send what the dispatcher finds; the text of the one ``kind`` mail to ``to``."""
    for pk in outbox.dispatch_pass().created:
        tasks.deliver.apply(args=[pk])
    row = Delivery.objects.get(kind=kind, channel="email")
    assert row.status == DeliveryStatus.SENT, row.last_error
    for path in sink.files():
        message = email.message_from_bytes(path.read_bytes(), policy=email.policy.default)
        if message["X-Gangway-Delivery"] == str(row.delivery_id):
            assert message["X-Envelope-To"] == to
            return f"{message['Subject']}\n{message.get_body().get_content()}"
    raise AssertionError(f"no mail of the {kind} delivery in {sink.directory}")


def test_the_reclaim_warning_on_the_page_is_mailed(
    mail_sink: MailSink, settings: Any, alice: Any, charlie: Any, acme: Any, globex: Any, h100: Any
) -> None:
    settings.RECLAIM_GRACE_SECONDS = 900
    borrower_fills_the_fleet(acme, globex, h100)
    own = _request(alice, acme, "own", h100, kind="prod")
    borrowed = _request(alice, acme, "borrowed", h100, kind="prod")
    run_admission_pass()
    _ready(own), _ready(borrowed)
    _request(charlie, globex, "mine", h100, workers=8)
    run_admission_pass()  # globex wants its quota back: acme's borrower is warned
    assert ClusterRequest.objects.get(pk=borrowed.pk).reclaim_after is not None

    page = _page(alice, "/t/acme/clusters/borrowed/")
    assert "Another team needs these borrowed GPUs back" in page
    text = _mailed(mail_sink, "reclaim_warning", "alice@example.com")
    assert "borrowed in acme: reclaim warning" in text
    assert "will be suspended (not deleted)" in text and "/t/acme/clusters/borrowed/" in text


def test_the_idle_warning_on_the_page_is_mailed(
    mail_sink: MailSink, bob: Any, acme: Any, l4: Any
) -> None:
    acme.idle_suspend_minutes = 30
    acme.save()
    row = _request(bob, acme, "sleepy", l4)
    run_admission_pass()
    row = _ready(row)
    now = timezone.now()
    apply_activity(row, Activity(False, now - timedelta(minutes=45), "no driver"), now=now)

    page = _page(bob, "/t/acme/clusters/sleepy/")
    assert "data-idle-warning" in page and "will be suspended" in page
    text = _mailed(mail_sink, "idle_warning", "bob@example.com")
    assert "sleepy in acme: idle warning" in text and "kept alive" in text


def test_a_hold_shown_on_the_page_is_mailed_to_the_owner(
    mail_sink: MailSink, alice: Any, bob: Any, acme: Any, h100: Any
) -> None:
    row = _request(bob, acme, "waiting", h100)
    assert row.state == State.QUEUED
    controls.cluster_hold(actor=alice, cluster=row, reason="budget review on Monday")

    page = _page(alice, "/t/acme/clusters/waiting/manage/")
    assert "On hold since" in page and "budget review on Monday" in page
    text = _mailed(mail_sink, "held", "bob@example.com")
    assert "waiting in acme: put on hold" in text and "budget review on Monday" in text
