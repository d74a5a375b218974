"""Webhooks and email end to end in one process: a real receiver on loopback, the
dispatcher reading real ClusterEvents, the delivery task run inline (retries too)."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from django.core import mail

from clusters.rows.transitions import note, transition
from notifications import outbox, services, tasks
from notifications.models import Delivery, DeliveryStatus, HandledEvent, TenantWebhook
from tests.notifications.conftest import Receiver, make_cluster

pytestmark = pytest.mark.django_db


def _hook(tenant: Any, admin: Any, url: str, kinds: list[str] | None = None) -> tuple[Any, str]:
    return services.tenant_webhook_create(
        actor=admin, tenant=tenant, url=url, kinds=kinds or ["cluster_ready", "failed"]
    )


def _dispatch_and_send() -> list[int]:
    created = outbox.dispatch_pass().created
    for pk in created:
        tasks.deliver.apply(args=[pk])
    return created


def test_ready_is_delivered_once_signed(
    fast_notify: Any, receiver: Receiver, acme: Any, alice: Any, bob: Any
) -> None:
    hook, secret = _hook(acme, alice, receiver.url)
    cluster = make_cluster(acme, bob)
    transition(cluster, "ready", reason="ready", message="head and workers are ready")

    _dispatch_and_send()
    _dispatch_and_send()  # a second pass finds nothing new

    assert len(receiver.received) == 1
    got = receiver.received[0]
    assert got.signed_by(secret)
    assert not got.signed_by(secret + "x")
    body = got.json
    assert body["event"] == "cluster_ready"
    assert body["tenant"] == "acme" and body["cluster"] == "bob-dev"
    assert body["state"] == "ready" and body["reason"] == "ready"
    assert body["url"].endswith("/t/acme/clusters/bob-dev/")
    assert "is ready" in body["text"]
    assert body["delivery_id"] == got.headers["X-Gangway-Delivery"]
    row = Delivery.objects.get(webhook=hook)
    assert str(row.delivery_id) == body["delivery_id"]
    assert (row.status, row.attempts) == (DeliveryStatus.SENT, 1)
    # bob's email (on by default) went too.
    assert [m.to for m in mail.outbox] == [["bob@example.com"]]
    assert mail.outbox[0].extra_headers["X-Gangway-Delivery"]


def test_retried_after_500s_then_delivered(
    fast_notify: Any, receiver: Receiver, acme: Any, alice: Any, bob: Any
) -> None:
    _hook(acme, alice, receiver.url)
    receiver.fail_with = [500, 503, 429]
    cluster = make_cluster(acme, bob)
    transition(cluster, "ready", reason="ready")

    _dispatch_and_send()

    assert len(receiver.received) == 4
    assert len(set(receiver.ids())) == 1  # the same delivery each time
    row = Delivery.objects.get(channel="webhook")
    assert (row.status, row.attempts, row.last_error) == (DeliveryStatus.SENT, 4, "")


def test_a_4xx_gives_up_and_gives_up_after_max_attempts(
    fast_notify: Any, receiver: Receiver, acme: Any, alice: Any, bob: Any
) -> None:
    _hook(acme, alice, receiver.url)
    receiver.fail_with = [404]
    transition(make_cluster(acme, bob), "ready", reason="ready")
    _dispatch_and_send()
    row = Delivery.objects.get(channel="webhook")
    assert (row.status, row.attempts) == (DeliveryStatus.GAVE_UP, 1)
    assert "HTTP 404" in row.last_error and "T0KEN" not in row.last_error

    fast_notify.NOTIFY_MAX_ATTEMPTS = 3
    receiver.fail_with = [500] * 10
    transition(make_cluster(acme, bob, name="other"), "ready", reason="ready")
    _dispatch_and_send()
    row = Delivery.objects.filter(channel="webhook").order_by("-id").first()
    assert (row.status, row.attempts) == (DeliveryStatus.GAVE_UP, 3)


def test_the_same_event_dispatched_twice_makes_one_delivery(
    fast_notify: Any, receiver: Receiver, acme: Any, alice: Any, bob: Any
) -> None:
    _hook(acme, alice, receiver.url)
    transition(make_cluster(acme, bob), "ready", reason="ready")
    first = outbox.dispatch_pass().created
    # Forget that the event was handled (a pass that crashed after writing deliveries
    # but, say, a restore that lost the marks): deriving again writes nothing new.
    HandledEvent.objects.all().delete()
    outbox.DispatchCursor.objects.update(last_event_id=0)
    second = outbox.dispatch_pass().created
    assert len(first) == 2 and second == []
    assert Delivery.objects.count() == 2
    for pk in first + first:
        tasks.deliver.apply(args=[pk])  # sent twice: the second finds it sent
    assert len(receiver.received) == 1


@pytest.mark.parametrize(
    ("start", "move", "reason", "kind", "carried"),
    [
        ("provisioning", "ready", "ready", "cluster_ready", "ready"),
        ("ready", "suspended", "idle", "suspended", "idle"),
        ("ready", "suspended", "reclaimed", "suspended", "reclaimed"),
        ("ready", "suspended", "suspended", "suspended", "suspended"),
        ("ready", "deleting", "expired", "suspended", "expired"),
        ("ready", "failed", "error", "failed", "error"),
        ("ready", None, "expiry_warning", "expiring_soon", "expiry_warning"),
        ("ready", None, "idle_warning", "idle_warning", "idle_warning"),
        ("ready", None, "reclaim_warning", "reclaim_warning", "reclaim_warning"),
        ("queued", None, "held", "held", "held"),
        ("queued", None, "released", None, None),
        ("ready", "deleting", "deleted", None, None),
        ("ready", None, "extended", None, None),
    ],
)
def test_event_kinds(
    fast_notify: Any,
    acme: Any,
    bob: Any,
    start: str,
    move: str | None,
    reason: str,
    kind: str | None,
    carried: str | None,
) -> None:
    cluster = make_cluster(acme, bob, state=start)
    if move:
        transition(cluster, move, reason=reason, message="m")
    else:
        note(cluster, reason=reason, message="m")
    outbox.dispatch_pass()
    rows = list(Delivery.objects.all())
    if kind is None:
        assert rows == []
        return
    assert [(r.kind, r.payload["reason"], r.channel) for r in rows] == [(kind, carried, "email")]


@pytest.mark.parametrize("end", ["succeeded", "failed", "stopped"])
def test_a_job_that_ends_is_job_finished(fast_notify: Any, acme: Any, bob: Any, end: str) -> None:
    job = make_cluster(acme, bob, name="train", state="running", workload="job")
    transition(job, end, reason=end)
    outbox.dispatch_pass()
    row = Delivery.objects.get()
    assert (row.kind, row.payload["state"]) == ("job_finished", end)
    assert row.payload["url"].endswith("/t/acme/jobs/train/")


def test_preferences_and_membership_decide_who_hears(
    fast_notify: Any, receiver: Receiver, acme: Any, bob: Any
) -> None:
    secret = services.preferences_set(
        user=bob,
        lines=[services.PreferenceLine(kind="cluster_ready", email=False, webhook=True)],
        webhook_url=receiver.url,
    )
    assert secret
    transition(make_cluster(acme, bob), "ready", reason="ready")
    _dispatch_and_send()
    assert [r.channel for r in Delivery.objects.all()] == ["webhook"]
    assert receiver.received[0].signed_by(secret)
    assert mail.outbox == []
    # Removed from the tenant: told of nothing in it any more.
    bob.memberships.all().delete()
    transition(make_cluster(acme, bob, name="later"), "ready", reason="ready")
    assert outbox.dispatch_pass().created == []


def test_no_secret_in_logs(
    fast_notify: Any, receiver: Receiver, acme: Any, alice: Any, bob: Any, caplog: Any
) -> None:
    caplog.set_level(logging.DEBUG)
    hook, secret = _hook(acme, alice, receiver.url)
    receiver.fail_with = [500]
    transition(make_cluster(acme, bob), "ready", reason="ready")
    _dispatch_and_send()
    # and a failure that cannot connect at all
    TenantWebhook.objects.filter(pk=hook.pk).update(url="http://127.0.0.1:9/T0KEN-path")
    fast_notify.NOTIFY_MAX_ATTEMPTS = 2
    transition(make_cluster(acme, bob, name="b2"), "ready", reason="ready")
    _dispatch_and_send()
    logged = caplog.text
    assert "delivery" in logged
    assert secret not in logged
    assert "T0KEN" not in logged
    errors = " ".join(Delivery.objects.values_list("last_error", flat=True))
    assert "ConnectionError" in errors and "T0KEN" not in errors and secret not in errors


def test_webhooks_to_private_addresses_are_refused_unless_allowed(
    fast_notify: Any, receiver: Receiver, acme: Any, alice: Any, bob: Any
) -> None:
    fast_notify.NOTIFY_ALLOW_PRIVATE_WEBHOOKS = False
    _hook(acme, alice, receiver.url)
    transition(make_cluster(acme, bob), "ready", reason="ready")
    _dispatch_and_send()
    row = Delivery.objects.get(channel="webhook")
    assert row.status == DeliveryStatus.GAVE_UP and "non-public" in row.last_error
    assert receiver.received == []
