"""Reads of the notifications app, for the API, the dashboard and the tasks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.db.models import QuerySet

from notifications import mailsink
from notifications.event_kinds import EventKind
from notifications.models import (
    DEFAULT_EMAIL,
    DEFAULT_WEBHOOK,
    Delivery,
    NotificationPreference,
    NotificationProfile,
    TenantWebhook,
)
from tenants.models import Tenant


def preferences_of(*, user: Any) -> dict[str, Any]:
    """The user's choices for every kind (defaults filled in), their webhook URL and
    whether they have an email address. The webhook's secret is never read here."""
    rows = {p.kind: p for p in NotificationPreference.objects.filter(user=user)}
    profile = NotificationProfile.objects.filter(user=user).only("webhook_url").first()
    lines = []
    for kind in EventKind:
        row = rows.get(kind.value)
        lines.append(
            {
                "kind": kind.value,
                "title": kind.label,
                "email": row.email if row else DEFAULT_EMAIL,
                "webhook": row.webhook if row else DEFAULT_WEBHOOK,
            }
        )
    return {
        "email": user.email,
        "webhook_url": profile.webhook_url if profile else "",
        "preferences": lines,
    }


def deliveries_of_user(*, user: Any) -> QuerySet[Delivery]:
    """The deliveries to the user's own email and webhook, newest first."""
    return (
        Delivery.objects.filter(user=user, target_key__startswith="user:")
        .select_related("tenant")
        .order_by("-created_at", "-id")
    )


def tenant_webhooks(*, tenant: Tenant) -> QuerySet[TenantWebhook]:
    """The tenant's webhooks (their secrets are never shown; serializers omit them)."""
    return TenantWebhook.objects.filter(tenant=tenant).order_by("created_at", "id")


def tenant_deliveries(*, tenant: Tenant) -> QuerySet[Delivery]:
    """Deliveries to the tenant's webhooks (deleted webhooks' included), newest first."""
    return (
        Delivery.objects.filter(tenant=tenant, target_key__startswith="webhook:")
        .select_related("tenant")
        .order_by("-created_at", "-id")
    )


def mail_sink_dir() -> Path | None:
    """Where the local mail sink keeps its mails (``MAIL_SINK_DIR``), or ``None``."""
    return Path(settings.MAIL_SINK_DIR) if settings.MAIL_SINK_DIR else None


def _recipient(user: Any) -> str | None:
    # Whose mails ``user`` may read: None (everybody's) for a platform admin, else their
    # own address ("" when they have none: they read none).
    return None if user.is_staff else (user.email or "")


def sink_mails(*, user: Any) -> list[mailsink.Mail]:
    """The mails the sink kept that ``user`` may read, newest first."""
    directory = mail_sink_dir()
    return [] if directory is None else mailsink.mails(directory, recipient=_recipient(user))


def sink_mail(*, user: Any, name: str) -> mailsink.Mail | None:
    """One kept mail, if ``user`` may read it."""
    directory = mail_sink_dir()
    if directory is None:
        return None
    return mailsink.mail(directory, name, recipient=_recipient(user))
