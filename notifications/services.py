"""Writes of the notifications app: preferences, tenant webhooks, and the outcome of
each delivery attempt. Keyword-only, atomic; audited where a tenant's setting changes
(STYLE 4, 5). Secrets are returned to the caller once and never logged."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.validators import URLValidator
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from notifications import enqueue, signing
from notifications.event_kinds import TEST, EventKind
from notifications.models import (
    OPEN,
    URL_MAX_LENGTH,
    Channel,
    Delivery,
    DeliveryStatus,
    NotificationPreference,
    NotificationProfile,
    TenantWebhook,
)
from notifications.sending import redact
from tenants.audit import audit_record
from tenants.models import Role, Tenant
from tenants.selectors import has_role

MAX_WEBHOOKS_PER_TENANT = 20


def validate_webhook_url(url: str, *, field: str = "url") -> str:
    """An http(s) URL of sensible length, without credentials in it; else a
    ``ValidationError`` naming ``field``."""
    url = url.strip()
    if len(url) > URL_MAX_LENGTH:
        raise ValidationError({field: f"At most {URL_MAX_LENGTH} characters."})
    try:
        URLValidator(schemes=["http", "https"])(url)
    except ValidationError as exc:
        raise ValidationError({field: "Enter an http:// or https:// URL."}) from exc
    if "@" in url.split("/", 3)[2]:
        raise ValidationError({field: "Put no user name or password in the URL."})
    return url


def _kinds(values: list[str], *, field: str = "kinds") -> list[str]:
    unknown = sorted(set(values) - set(EventKind.values))
    if unknown:
        raise ValidationError({field: f"Unknown kinds: {', '.join(unknown)}."})
    return [k for k in EventKind.values if k in values]


@dataclass(frozen=True)
class PreferenceLine:
    kind: str
    email: bool
    webhook: bool


@transaction.atomic
def preferences_set(
    *, user: Any, lines: list[PreferenceLine], webhook_url: str | None = None
) -> str | None:
    """Replace the user's choices for the kinds named and, when ``webhook_url`` is given,
    their webhook URL ("" removes it). Returns the new signing secret when the URL was
    set or changed (to show once), else ``None``."""
    _kinds([line.kind for line in lines], field="preferences")
    for line in lines:
        NotificationPreference.objects.update_or_create(
            user=user, kind=line.kind, defaults={"email": line.email, "webhook": line.webhook}
        )
    if webhook_url is None:
        return None
    profile, _ = NotificationProfile.objects.select_for_update().get_or_create(user=user)
    if not webhook_url:
        profile.webhook_url, profile.webhook_secret = "", ""
        profile.save()
        return None
    url = validate_webhook_url(webhook_url, field="webhook_url")
    if url == profile.webhook_url:
        return None
    profile.webhook_url = url
    profile.webhook_secret = signing.new_secret()
    profile.save()
    return profile.webhook_secret


def _require_admin(actor: Any, tenant: Tenant) -> None:
    if not has_role(user=actor, tenant=tenant, at_least=Role.ADMIN):
        raise PermissionDenied("Only tenant admins manage the tenant's webhooks.")


@transaction.atomic
def tenant_webhook_create(
    *, actor: Any, tenant: Tenant, url: str, kinds: list[str], name: str = "", active: bool = True
) -> tuple[TenantWebhook, str]:
    """Add a webhook to the tenant (tenant admins); returns it and its secret, which is
    shown to the caller this once."""
    _require_admin(actor, tenant)
    url = validate_webhook_url(url)
    chosen = _kinds(kinds)
    if not chosen:
        raise ValidationError({"kinds": "Choose at least one kind of event."})
    if TenantWebhook.objects.filter(tenant=tenant).count() >= MAX_WEBHOOKS_PER_TENANT:
        raise ValidationError(
            {"url": f"A tenant has at most {MAX_WEBHOOKS_PER_TENANT} webhooks; delete one first."}
        )
    secret = signing.new_secret()
    hook = TenantWebhook.objects.create(
        tenant=tenant,
        name=name.strip()[:80],
        url=url,
        kinds=chosen,
        active=active,
        secret=secret,
        created_by=actor if getattr(actor, "is_authenticated", False) else None,
    )
    audit_record(
        actor=actor,
        action="webhook.create",
        obj=hook,
        tenant=tenant,
        data={"target": redact(url), "kinds": chosen, "active": active},
    )
    return hook, secret


@transaction.atomic
def tenant_webhook_delete(*, actor: Any, webhook: TenantWebhook) -> None:
    """Delete a tenant webhook (tenant admins); its past deliveries stay in the log."""
    _require_admin(actor, webhook.tenant)
    audit_record(
        actor=actor,
        action="webhook.delete",
        obj=webhook,
        tenant=webhook.tenant,
        data={"target": redact(webhook.url)},
    )
    webhook.delete()


@transaction.atomic
def tenant_webhook_test(*, actor: Any, webhook: TenantWebhook) -> Delivery:
    """Queue a test notice to the webhook (tenant admins), sent like any other."""
    _require_admin(actor, webhook.tenant)
    now = timezone.now()
    tenant = webhook.tenant
    delivery = Delivery.objects.create(
        tenant=tenant,
        kind=TEST,
        channel=Channel.WEBHOOK,
        target_key=f"webhook:{webhook.pk}",
        webhook=webhook,
        user=actor if getattr(actor, "is_authenticated", False) else None,
        target=f"tenant {webhook}",
        payload={
            "text": f"Test notice from gangway for {tenant.slug}: this webhook works.",
            "event": TEST,
            "tenant": tenant.slug,
            "cluster": "",
            "state": "",
            "reason": "test",
            "url": f"{settings.PUBLIC_BASE_URL}/t/{tenant.slug}/webhooks/",
            "at": now.isoformat(),
        },
        due_at=now,
    )
    enqueue.deliver_after_commit([delivery.pk])
    return delivery


# --- Delivery attempts (called by the tasks) -------------------------------------------


def lease_seconds() -> float:
    """How long a worker's claim on a delivery lasts: longer than any one send."""
    return max(settings.NOTIFY_WEBHOOK_TIMEOUT_SECONDS, float(settings.EMAIL_TIMEOUT)) * 2 + 5


def delivery_claim(*, pk: int) -> Delivery | None:
    """Claim an open delivery for one attempt with a conditional UPDATE (a lease): the
    row re-read, or ``None`` if it is done or another worker holds it."""
    now = timezone.now()
    claimed = (
        Delivery.objects.filter(pk=pk, status__in=OPEN)
        .filter(Q(lease_until__isnull=True) | Q(lease_until__lt=now))
        .update(
            lease_until=now + timedelta(seconds=lease_seconds()),
            attempts=F("attempts") + 1,
            updated_at=now,
        )
    )
    if not claimed:
        return None
    return Delivery.objects.select_related("user", "webhook").filter(pk=pk).first()


def delivery_sent(*, delivery: Delivery) -> bool:
    """Mark the claimed delivery sent (once: only an open row moves)."""
    now = timezone.now()
    return bool(
        Delivery.objects.filter(pk=delivery.pk, status__in=OPEN).update(
            status=DeliveryStatus.SENT, sent_at=now, lease_until=None, last_error="", updated_at=now
        )
    )


def delivery_failed(*, delivery: Delivery, error: str, retry_in: float | None) -> None:
    """Record a failed attempt: ``failed`` with the next try due in ``retry_in``
    seconds, or ``gave_up`` when ``retry_in`` is ``None``."""
    now = timezone.now()
    values: dict[str, Any] = {"last_error": error[:500], "lease_until": None, "updated_at": now}
    if retry_in is None:
        values["status"] = DeliveryStatus.GAVE_UP
    else:
        values.update(status=DeliveryStatus.FAILED, due_at=now + timedelta(seconds=retry_in))
    Delivery.objects.filter(pk=delivery.pk, status__in=OPEN).update(**values)


def deliveries_resend_stale() -> list[int]:
    """The open deliveries whose message was lost, or whose worker died mid-send: due
    more than ``NOTIFY_STALE_SECONDS`` ago and not under a live lease. Their ``due_at``
    is renewed, so each is re-sent at most once per stale interval."""
    now = timezone.now()
    stale = now - timedelta(seconds=settings.NOTIFY_STALE_SECONDS)
    rows = list(
        Delivery.objects.filter(status__in=OPEN, due_at__lt=stale)
        .filter(Q(lease_until__isnull=True) | Q(lease_until__lt=now))
        .values_list("pk", flat=True)[:500]
    )
    Delivery.objects.filter(pk__in=rows).update(due_at=now)
    return rows


DEMO_WEBHOOK_NAME = "make run demo receiver"


@transaction.atomic
def demo_webhook_point(*, url: str, slugs: list[str]) -> list[str]:
    """Point the demo webhook (:data:`DEMO_WEBHOOK_NAME`, every kind) of each tenant in
    ``slugs`` that exists at ``url``, creating it once; the slugs it was set for. For
    ``make run``'s own receiver only (``manage.py demo_webhook``), so it is not audited
    as a person's change."""
    url = validate_webhook_url(url)
    done: list[str] = []
    for tenant in Tenant.objects.filter(slug__in=slugs).order_by("slug"):
        hook = TenantWebhook.objects.filter(tenant=tenant, name=DEMO_WEBHOOK_NAME).first()
        if hook is None:
            TenantWebhook.objects.create(
                tenant=tenant,
                name=DEMO_WEBHOOK_NAME,
                url=url,
                kinds=list(EventKind.values),
                secret=signing.new_secret(),
            )
        elif hook.url != url or hook.kinds != list(EventKind.values):
            hook.url, hook.kinds = url, list(EventKind.values)
            hook.save(update_fields=["url", "kinds"])
        done.append(tenant.slug)
    return done
