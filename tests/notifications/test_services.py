"""notifications.services: preferences, tenant webhooks (admins only, audited, secret
shown once) and each delivery attempt claimed, finished or retried exactly once."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.utils import timezone

from notifications import services
from notifications.event_kinds import EventKind
from notifications.models import (
    Delivery,
    DeliveryStatus,
    NotificationPreference,
    NotificationProfile,
    TenantWebhook,
)
from tenants.models import AuditEvent

KIND = EventKind.values[0]


def test_preferences_are_replaced_and_a_new_webhook_url_gets_a_new_secret(bob: Any) -> None:
    secret = services.preferences_set(
        user=bob,
        lines=[services.PreferenceLine(kind=KIND, email=False, webhook=True)],
        webhook_url="https://hooks.example.com/bob",
    )
    assert secret and NotificationProfile.objects.get(user=bob).webhook_secret == secret
    assert NotificationPreference.objects.get(user=bob, kind=KIND).email is False
    same = services.preferences_set(user=bob, lines=[], webhook_url="https://hooks.example.com/bob")
    assert same is None
    services.preferences_set(user=bob, lines=[], webhook_url="")
    assert NotificationProfile.objects.get(user=bob).webhook_url == ""
    with pytest.raises(ValidationError):
        services.preferences_set(
            user=bob, lines=[services.PreferenceLine(kind="no-such", email=True, webhook=True)]
        )


def test_a_tenant_admin_adds_and_removes_a_webhook_each_audited_without_its_secret(
    alice: Any, acme: Any
) -> None:
    hook, secret = services.tenant_webhook_create(
        actor=alice, tenant=acme, url="https://hooks.example.com/t/token123", kinds=[KIND]
    )
    assert TenantWebhook.objects.get(pk=hook.pk).secret == secret
    created = AuditEvent.objects.get(action="webhook.create")
    assert secret not in str(created.data) and "token123" not in str(created.data)
    services.tenant_webhook_delete(actor=alice, webhook=hook)
    assert not TenantWebhook.objects.filter(pk=hook.pk).exists()
    assert AuditEvent.objects.filter(action="webhook.delete").count() == 1


def test_engineers_add_no_webhook_and_a_url_with_credentials_is_refused(
    alice: Any, bob: Any, acme: Any
) -> None:
    with pytest.raises(PermissionDenied):
        services.tenant_webhook_create(
            actor=bob, tenant=acme, url="https://hooks.example.com/", kinds=[KIND]
        )
    with pytest.raises(ValidationError):
        services.tenant_webhook_create(
            actor=alice, tenant=acme, url="https://user:pw@hooks.example.com/", kinds=[KIND]
        )
    with pytest.raises(ValidationError):
        services.tenant_webhook_create(
            actor=alice, tenant=acme, url="https://hooks.example.com/", kinds=[]
        )
    assert not TenantWebhook.objects.exists()


def test_a_delivery_is_claimed_once_and_finished_once(
    alice: Any, acme: Any, django_capture_on_commit_callbacks: Any
) -> None:
    hook, _ = services.tenant_webhook_create(
        actor=alice, tenant=acme, url="https://hooks.example.com/", kinds=[KIND]
    )
    delivery = services.tenant_webhook_test(actor=alice, webhook=hook)
    claimed = services.delivery_claim(pk=delivery.pk)
    assert claimed is not None and claimed.attempts == 1
    assert services.delivery_claim(pk=delivery.pk) is None  # under the first one's lease
    services.delivery_failed(delivery=claimed, error="503 from the receiver", retry_in=30)
    row = Delivery.objects.get(pk=delivery.pk)
    assert row.status == DeliveryStatus.FAILED and row.last_error == "503 from the receiver"
    again = services.delivery_claim(pk=delivery.pk)
    assert again is not None and services.delivery_sent(delivery=again)
    assert not services.delivery_sent(delivery=again)
    assert Delivery.objects.get(pk=delivery.pk).status == DeliveryStatus.SENT


def test_only_stale_unleased_deliveries_are_sent_again(alice: Any, acme: Any) -> None:
    hook, _ = services.tenant_webhook_create(
        actor=alice, tenant=acme, url="https://hooks.example.com/", kinds=[KIND]
    )
    stale = services.tenant_webhook_test(actor=alice, webhook=hook)
    fresh = services.tenant_webhook_test(actor=alice, webhook=hook)
    Delivery.objects.filter(pk=stale.pk).update(due_at=timezone.now() - timedelta(hours=1))
    assert services.deliveries_resend_stale() == [stale.pk]
    assert services.deliveries_resend_stale() == []  # its due time was renewed
    assert fresh.pk not in services.deliveries_resend_stale()


def test_the_demo_webhook_is_pointed_once_per_existing_tenant(acme: Any) -> None:
    done = services.demo_webhook_point(url="http://127.0.0.1:8125/", slugs=["acme", "nope"])
    services.demo_webhook_point(url="http://127.0.0.1:8126/", slugs=["acme"])
    assert done == ["acme"]
    hook = TenantWebhook.objects.get(tenant=acme)
    assert hook.url == "http://127.0.0.1:8126/" and hook.kinds == list(EventKind.values)
