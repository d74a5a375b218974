"""Soft money caps' notices (docs/cost.md): once per UTC month, when a tenant or one of
its engineers has spent its cap's soft limit (or, without one, its hard limit), the
tenant's admins and that engineer are told by their channels for ``cost_cap`` (email,
their webhook) and the tenant's webhooks that take ``cost_cap``.

The cap row is locked while it is checked and marked, so two checks (the beat's and a
retry) tell one month once. Deliveries are sent like any other (``notifications.tasks``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from clusters.models import CostCap
from clusters.rows.cost_caps import CapStatus, cap_statuses
from notifications import enqueue
from notifications.event_kinds import EventKind
from notifications.models import (
    DEFAULT_EMAIL,
    DEFAULT_WEBHOOK,
    Channel,
    Delivery,
    NotificationPreference,
    NotificationProfile,
    TenantWebhook,
)
from notifications.sending import redact
from tenants.models import Membership, Role, Tenant

KIND = EventKind.COST_CAP


def _payload(status: CapStatus, *, now: datetime) -> dict[str, Any]:
    limit = "soft" if status.cap.soft_limit is not None else "hard"
    tenant = status.cap.tenant
    text = f"Cost cap reached: {status.describe(limit=limit)}."
    if status.hard_crossed:
        text += " New requests are refused until the month turns or the cap is raised."
    return {
        "text": text,
        "subject": f"{status.who}: cost cap reached",
        "event": KIND.value,
        "tenant": tenant.slug,
        "cluster": "",
        "owner": status.cap.username,
        "state": "",
        "reason": f"{limit}_cap",
        "message": "",
        "url": f"{settings.PUBLIC_BASE_URL}/t/{tenant.slug}/usage/report/",
        "at": now.isoformat(),
    }


def _recipients(tenant: Tenant, username: str) -> list[Any]:
    """The tenant's active admins, and the engineer the cap is about if a member."""
    who = Q(role=Role.ADMIN)
    if username:
        who |= Q(user__username=username)
    return [
        m.user
        for m in Membership.objects.filter(who, tenant=tenant).select_related("user")
        if m.user.is_active
    ]


def _write(status: CapStatus, *, now: datetime) -> list[int]:
    """The deliveries of one crossed cap's notice, in the caller's transaction."""
    cap, tenant = status.cap, status.cap.tenant
    payload = _payload(status, now=now)
    key = f"{cap.pk}:{status.month:%Y-%m}"
    rows: list[Delivery] = []
    users = _recipients(tenant, cap.username)
    prefs = {p.user_id: p for p in NotificationPreference.objects.filter(user__in=users, kind=KIND)}
    profiles = {p.user_id: p for p in NotificationProfile.objects.filter(user__in=users)}
    for user in users:
        pref, profile = prefs.get(user.pk), profiles.get(user.pk)
        if (pref.email if pref else DEFAULT_EMAIL) and user.email:
            rows.append(
                Delivery(
                    channel=Channel.EMAIL,
                    target_key=f"cost:{key}:email:{user.pk}",
                    user=user,
                    target=f"email to {user.email}",
                )
            )
        if (pref.webhook if pref else DEFAULT_WEBHOOK) and profile and profile.webhook_url:
            rows.append(
                Delivery(
                    channel=Channel.WEBHOOK,
                    target_key=f"cost:{key}:user:{user.pk}",
                    user=user,
                    target=f"webhook {redact(profile.webhook_url)}",
                )
            )
    for hook in TenantWebhook.objects.filter(tenant=tenant, active=True):
        if KIND.value in hook.kinds:
            rows.append(
                Delivery(
                    channel=Channel.WEBHOOK,
                    target_key=f"webhook:{hook.pk}",
                    webhook=hook,
                    target=f"tenant {hook}",
                )
            )
    for row in rows:
        row.tenant, row.kind, row.payload, row.due_at = tenant, KIND.value, payload, now
        row.save()
    return [row.pk for row in rows]


def check_cost_caps(*, now: datetime | None = None) -> list[int]:
    """Tell every cap crossed this month and not yet told of it; returns the ids of the
    deliveries written (sent after commit)."""
    now = now or timezone.now()
    created: list[int] = []
    tenants = Tenant.objects.filter(
        pk__in=CostCap.objects.unscoped().values("tenant_id"), archived_at__isnull=True
    )
    for tenant in tenants:
        for status in cap_statuses(tenant=tenant, now=now):
            if status.cap.notified_month == status.month:
                continue
            if not (status.soft_crossed or status.hard_crossed):
                continue
            with transaction.atomic():
                cap = CostCap.objects.unscoped().select_for_update().get(pk=status.cap.pk)
                if cap.notified_month == status.month:
                    continue  # told meanwhile by another check
                ids = _write(status, now=now)
                cap.notified_month = status.month
                cap.save(update_fields=["notified_month", "updated_at"])
                enqueue.deliver_after_commit(ids)
                created += ids
    return created
