"""Queue controls for tenant admins: a request's priority, and holding it back.

A tenant admin (a platform admin, in any tenant) raises or lowers a request's priority
within ``CLUSTER_PRIORITY_MIN``..``CLUSTER_PRIORITY_MAX`` and holds a queued request
back until released (the pass skips it; its place is kept for nobody). Each takes a
reason, which the owner reads in the timeline, and is audited. Only the built-in queue
orders requests itself: under Kueue these controls refuse with a 409 that says so.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from clusters.domain.states import LIVE, State
from clusters.models import ClusterRequest
from clusters.queue.backends import queue_backend
from clusters.rows import lifecycle
from clusters.rows.transitions import note
from controlplane.exceptions import ServiceConflict
from tenants.audit import audit_record
from tenants.models import Role
from tenants.selectors import role_in_tenant

REASON_MAX = 300


def priority_range() -> tuple[int, int]:
    """The lowest and highest priority a request may have (settings)."""
    return settings.CLUSTER_PRIORITY_MIN, settings.CLUSTER_PRIORITY_MAX


def _require_tenant_admin(*, actor: Any, cluster: ClusterRequest, role: str | None) -> None:
    role = role or role_in_tenant(user=actor, tenant=cluster.tenant)
    if role != Role.ADMIN:
        raise PermissionDenied("Only the tenant's admins may change the queue.")


def _require_own_queue() -> None:
    if queue_backend().name != "builtin":
        raise ServiceConflict(
            "Kueue orders the queue in this deployment (QUEUE_MODE=kueue): a request's "
            "priority comes from its kind's WorkloadPriorityClass and cannot be held here.",
            code="queue_mode",
        )


def _clean_reason(reason: str) -> str:
    reason = " ".join(str(reason or "").split())
    if not reason:
        raise ValidationError({"reason": ["Say why: the owner reads it in the timeline."]})
    if len(reason) > REASON_MAX:
        raise ValidationError({"reason": [f"At most {REASON_MAX} characters."]})
    return reason


def _queue_change(
    cluster: ClusterRequest,
    *,
    actor: Any,
    fields: dict[str, Any],
    note_reason: str,
    message: str,
    action: str,
    data: dict[str, Any],
) -> None:
    """Write ``fields`` on the locked row, tell its timeline and the audit log, and have
    the queue counted again (the requests around it may move)."""
    ClusterRequest.objects.filter(pk=cluster.pk).update(**fields)
    for name, value in fields.items():
        setattr(cluster, name, value)
    note(cluster, reason=note_reason, message=message, actor=actor)
    audit_record(actor=actor, action=action, obj=cluster, tenant=cluster.tenant, data=data)
    queue_backend().request_queued(cluster.pk)


def cluster_set_priority(
    *,
    actor: Any,
    cluster: ClusterRequest,
    priority: int,
    reason: str,
    role: str | None = None,
) -> ClusterRequest:
    """Set a live request's priority (tenant admins); the queue re-orders at once."""
    _require_tenant_admin(actor=actor, cluster=cluster, role=role)
    _require_own_queue()
    low, high = priority_range()
    if isinstance(priority, bool) or not isinstance(priority, int) or not low <= priority <= high:
        raise ValidationError({"priority": [f"A priority is a whole number from {low} to {high}."]})
    reason = _clean_reason(reason)
    with transaction.atomic():
        cluster = lifecycle.locked(cluster)
        if cluster.state not in LIVE:
            raise ServiceConflict(
                f"This request is {cluster.state}: its priority no longer matters.",
                code="invalid_state",
            )
        before = cluster.priority
        if before == priority:
            return cluster
        _queue_change(
            cluster,
            actor=actor,
            fields={"priority": priority},
            note_reason="priority_changed",
            message=f"priority {before} -> {priority}: {reason}",
            action="cluster.priority",
            data={"before": before, "after": priority, "reason": reason},
        )
    return cluster


def cluster_hold(
    *, actor: Any, cluster: ClusterRequest, reason: str, role: str | None = None
) -> ClusterRequest:
    """Put a queued request on hold: admission passes over it until it is released."""
    _require_tenant_admin(actor=actor, cluster=cluster, role=role)
    _require_own_queue()
    reason = _clean_reason(reason)
    with transaction.atomic():
        cluster = lifecycle.locked(cluster)
        if cluster.state != State.QUEUED:
            raise ServiceConflict(
                f"Only a queued request can be held; this one is {cluster.state}. "
                "Suspend a running cluster instead.",
                code="invalid_state",
            )
        if cluster.held_at is not None:
            raise ServiceConflict("This request is already on hold.", code="already_held")
        who = actor.get_username()
        fields = {
            "held_at": timezone.now(),
            "hold_reason": reason,
            "queue_position": None,
            "queue_flavor_position": None,
            "queue_reason": "held",
            "queue_message": f"On hold by {who}: {reason}"[:500],
            "queue_eta": None,
            "queue_flavors": [],
        }
        # The requests behind it move up: positions are re-counted by a pass.
        _queue_change(
            cluster,
            actor=actor,
            fields=fields,
            note_reason="held",
            message=f"on hold: {reason}",
            action="cluster.hold",
            data={"reason": reason},
        )
    return cluster


def cluster_release(
    *, actor: Any, cluster: ClusterRequest, reason: str = "", role: str | None = None
) -> ClusterRequest:
    """Release a held request: it takes its place in the queue again (by its priority
    and age, as if it had never been held)."""
    _require_tenant_admin(actor=actor, cluster=cluster, role=role)
    reason = " ".join(str(reason or "").split())[:REASON_MAX]
    with transaction.atomic():
        cluster = lifecycle.locked(cluster)
        if cluster.held_at is None:
            raise ServiceConflict("This request is not on hold.", code="not_held")
        _queue_change(
            cluster,
            actor=actor,
            fields={"held_at": None, "hold_reason": "", "queue_reason": "", "queue_message": ""},
            note_reason="released",
            message=f"released from hold: {reason}" if reason else "released from hold",
            action="cluster.release",
            data={"reason": reason},
        )
    return cluster
