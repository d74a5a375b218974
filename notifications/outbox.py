"""The dispatcher: new ClusterEvents in, deliveries out (crash-safe, at least once).

One pass at a time (the cursor row is locked with ``SKIP LOCKED``; a second pass
returns at once). In one transaction a pass reads the events past the cursor not yet
handled, in id order; writes a :class:`Delivery` per recipient channel with
``get_or_create`` on the unique (event, target) key; marks the events handled; and moves
the cursor past the events older than the horizon (see :class:`HandledEvent` for why).
A crash before commit leaves everything as it was; the next pass does it again.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Max, Q
from django.utils import timezone

from clusters.domain.workload_kinds import kind_of
from clusters.models import ClusterEvent, ClusterRequest
from notifications import event_kinds
from notifications.models import (
    DEFAULT_EMAIL,
    DEFAULT_WEBHOOK,
    Channel,
    Delivery,
    DispatchCursor,
    HandledEvent,
    NotificationPreference,
    NotificationProfile,
    TenantWebhook,
)
from notifications.sending import redact
from tenants.models import Membership, Tenant

BATCH = 500


@dataclass
class PassReport:
    """What one dispatch pass did."""

    busy: bool = False
    events: int = 0
    created: list[int] = field(default_factory=list)
    cursor: int = 0


_SUSPENDED = event_kinds.EventKind.SUSPENDED
# What a notice of each kind says: {what} names the workload, {message} is the event's.
_TEXTS = {
    event_kinds.EventKind.CLUSTER_READY: "{what} is ready.",
    event_kinds.EventKind.EXPIRING_SOON: "{what} expires soon: {message}",
    event_kinds.EventKind.IDLE_WARNING: "{what} is idle and will be suspended: {message}",
    event_kinds.EventKind.RECLAIM_WARNING: (
        "{what} will be suspended to give borrowed GPUs back: {message}"
    ),
    event_kinds.EventKind.PREEMPTION_NOTICE: "{what} will be preempted: {message}",
    event_kinds.EventKind.PREEMPTED: "{what} was {message}",
    event_kinds.EventKind.HELD: "{what} was put {message}.",
    event_kinds.EventKind.PODS_FAILING: "{what} {message}",
    event_kinds.EventKind.MEMBER_DRAIN: "{what}: {message}",
    _SUSPENDED: "{what} {cause}.",
    event_kinds.EventKind.FAILED: "{what} failed: {message}",
}
_FINISHED = "{what} finished: {state}."


def payload_of(event: ClusterEvent, derived: event_kinds.Derived) -> dict[str, Any]:
    """What a notice of ``event`` says (the body's fields, without its delivery id)."""
    cluster: ClusterRequest = event.cluster
    tenant: Tenant = cluster.tenant
    of = kind_of(cluster)
    what = f"{of.noun.capitalize()} {cluster.name} in {tenant.slug}"
    kind = derived.kind
    cause = event_kinds.SUSPENSION_CAUSES[derived.reason] if kind == _SUSPENDED else ""
    text = _TEXTS.get(kind, _FINISHED).format(
        what=what, message=event.message, state=event.to_state, cause=cause
    )
    return {
        "text": text,
        "subject": f"{what}: {kind.label.lower()}",
        "event": kind.value,
        "tenant": tenant.slug,
        "cluster": cluster.name,
        "workload": cluster.workload,
        "owner": cluster.owner.get_username(),
        "state": event.to_state,
        "reason": derived.reason,
        "message": event.message,
        "url": f"{settings.PUBLIC_BASE_URL}/t/{tenant.slug}/{of.section}/{cluster.name}/",
        "at": event.at.isoformat(),
    }


class _Recipients:
    """Who hears of what, for one pass's batch of events: read up front in one query per
    table (memberships, preferences, profiles, webhooks), whatever the number of owners
    and tenants in the batch. A pass after a burst handles hundreds of owners; reading
    them one by one cost three queries each."""

    def __init__(self, events: list[ClusterEvent]) -> None:
        clusters = [event.cluster for event in events]
        owners = {c.owner_id for c in clusters}
        tenants = {c.tenant_id for c in clusters}
        self._members = set(
            Membership.objects.filter(user_id__in=owners, tenant_id__in=tenants).values_list(
                "tenant_id", "user_id"
            )
        )
        self._prefs: dict[int, dict[str, NotificationPreference]] = defaultdict(dict)
        for pref in NotificationPreference.objects.filter(user_id__in=owners):
            self._prefs[pref.user_id][pref.kind] = pref
        self._profiles = {
            p.user_id: p for p in NotificationProfile.objects.filter(user_id__in=owners)
        }
        self._webhooks: dict[int, list[TenantWebhook]] = defaultdict(list)
        for hook in TenantWebhook.objects.filter(tenant_id__in=tenants, active=True):
            self._webhooks[hook.tenant_id].append(hook)

    def owner_channels(self, cluster: ClusterRequest, kind: str) -> list[tuple[str, str]]:
        """``(channel, target shown)`` of the owner's channels for ``kind``."""
        owner = cluster.owner
        if (cluster.tenant_id, owner.pk) not in self._members or not owner.is_active:
            return []  # no longer of the tenant: told of nothing in it
        pref = self._prefs[owner.pk].get(kind)
        profile = self._profiles.get(owner.pk)
        out: list[tuple[str, str]] = []
        if (pref.email if pref else DEFAULT_EMAIL) and owner.email:
            out.append((Channel.EMAIL, f"email to {owner.email}"))
        if (pref.webhook if pref else DEFAULT_WEBHOOK) and profile and profile.webhook_url:
            out.append((Channel.WEBHOOK, f"webhook {redact(profile.webhook_url)}"))
        return out

    def webhooks(self, tenant_id: int, kind: str) -> list[TenantWebhook]:
        return [w for w in self._webhooks[tenant_id] if kind in w.kinds]


def _deliveries(
    event: ClusterEvent, recipients: _Recipients, now: datetime, created: list[int]
) -> None:
    cluster = event.cluster
    derived = event_kinds.derive(
        from_state=event.from_state,
        to_state=event.to_state,
        reason=event.reason,
        finished=kind_of(cluster).finished,
    )
    if derived is None:
        return
    if event.at < now - timedelta(seconds=settings.NOTIFY_MAX_EVENT_AGE_SECONDS):
        return  # old news
    payload = payload_of(event, derived)
    targets: list[tuple[str, dict[str, Any]]] = []
    for channel, shown in recipients.owner_channels(cluster, derived.kind):
        targets.append(
            (
                f"user:{cluster.owner_id}:{channel}",
                {"channel": channel, "user_id": cluster.owner_id, "target": shown},
            )
        )
    for hook in recipients.webhooks(cluster.tenant_id, derived.kind):
        targets.append(
            (
                f"webhook:{hook.pk}",
                {"channel": Channel.WEBHOOK, "webhook": hook, "target": f"tenant {hook}"},
            )
        )
    for key, values in targets:
        row, made = Delivery.objects.get_or_create(
            event=event,
            target_key=key,
            defaults={
                **values,
                "tenant_id": cluster.tenant_id,
                "kind": derived.kind,
                "payload": payload,
                "due_at": now,
            },
        )
        if made:
            created.append(row.pk)


def _maybe_notable(event: ClusterEvent) -> bool:
    return event_kinds.maybe_notable(
        from_state=event.from_state, to_state=event.to_state, reason=event.reason
    )


def _with_clusters(events: list[ClusterEvent]) -> list[ClusterEvent]:
    """``events`` with their requests (and each request's tenant and owner) attached,
    read in one query.

    Only the events that may be notable are given their requests: most events of a
    burst (requested, admitted, provisioning) are never told, and reading the request,
    tenant and owner rows of every one of them was most of a pass. An event whose
    request was deleted between the two reads (with its tenant; the event goes with it)
    is left out, as a pass that started a moment later would not have seen it.
    """
    clusters = (
        ClusterRequest.objects.unscoped()
        .select_related("tenant", "owner")
        .in_bulk({event.cluster_id for event in events})
    )
    found = [event for event in events if event.cluster_id in clusters]
    for event in found:
        event.cluster = clusters[event.cluster_id]
    return found


def _advance(cursor: int, horizon: datetime) -> int:
    """The new cursor: the highest id below the first event that is unhandled or newer
    than ``horizon`` (every event up to it is handled and old enough)."""
    handled = HandledEvent.objects.filter(event_id__gt=cursor).values("event_id")
    after = ClusterEvent.objects.filter(id__gt=cursor)
    blocker = (
        after.filter(Q(at__gt=horizon) | ~Q(id__in=handled))
        .order_by("id")
        .values_list("id", flat=True)
        .first()
    )
    below = after.filter(id__lt=blocker) if blocker is not None else after
    top = below.aggregate(top=Max("id"))["top"]
    return int(top) if top is not None else cursor


def dispatch_pass(*, now: datetime | None = None, batch: int = BATCH) -> PassReport:
    """One pass of the dispatcher (see the module docstring); the ids of the deliveries
    it wrote are in the report, for the caller to send after commit."""
    now = now or timezone.now()
    DispatchCursor.objects.get_or_create(pk=1)
    report = PassReport()
    with transaction.atomic():
        cursor = DispatchCursor.objects.select_for_update(skip_locked=True).filter(pk=1).first()
        if cursor is None:
            report.busy = True
            return report
        handled = HandledEvent.objects.filter(event_id__gt=cursor.last_event_id)
        events = list(
            ClusterEvent.objects.filter(id__gt=cursor.last_event_id)
            .exclude(id__in=handled.values("event_id"))
            .order_by("id")[:batch]
        )
        notable = _with_clusters([e for e in events if _maybe_notable(e)])
        recipients = _Recipients(notable)
        for event in notable:
            _deliveries(event, recipients, now, report.created)
        HandledEvent.objects.bulk_create(
            [HandledEvent(event_id=e.pk) for e in events], ignore_conflicts=True
        )
        horizon = now - timedelta(seconds=settings.NOTIFY_OUTBOX_HORIZON_SECONDS)
        cursor.last_event_id = _advance(cursor.last_event_id, horizon)
        cursor.save(update_fields=["last_event_id", "updated_at"])
        HandledEvent.objects.filter(event_id__lte=cursor.last_event_id).delete()
        report.events = len(events)
        report.cursor = cursor.last_event_id
    return report
