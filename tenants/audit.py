"""Writing audit events. Called by services inside their transaction (STYLE 5)."""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from django.db import models, transaction

from controlplane.middleware import current_request_id
from tenants.models import AuditEvent, Tenant


def audit_record(
    *,
    actor: Any,
    action: str,
    obj: models.Model | None = None,
    tenant: Tenant | None = None,
    object_type: str = "",
    object_id: str = "",
    object_repr: str = "",
    data: dict[str, Any] | None = None,
    actor_name: str = "",
) -> AuditEvent:
    """Record that ``actor`` did ``action`` to ``obj``; must run inside the change's transaction.

    ``actor`` is a user or ``None`` for the system (tasks, the admission pass);
    ``actor_name`` names an actor without an account (``anonymous`` for a failed
    sign-in). The request id comes from the current request, so an audit row can be
    matched to logs.
    """
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("audit_record must be called inside the transaction of the change")
    user = actor if getattr(actor, "is_authenticated", False) else None
    if obj is not None:
        object_type = object_type or obj._meta.model_name or ""
        object_id = object_id or str(obj.pk)
        object_repr = object_repr or str(obj)[:200]
    return AuditEvent.objects.create(
        actor=user,
        actor_name=user.get_username() if user else (actor_name or "system"),
        action=action,
        tenant=tenant,
        tenant_slug=tenant.slug if tenant else "",
        object_type=object_type,
        object_id=object_id,
        object_repr=object_repr[:200],
        request_id=current_request_id(),
        data=data or {},
    )


def audit_snapshot(obj: Any, fields: Sequence[str]) -> dict[str, Any]:
    """``obj``'s ``fields`` as an audit event's JSON data; decimals (a tenant's weight)
    are kept exact, as strings."""
    return {
        name: str(value) if isinstance(value, Decimal) else value
        for name in fields
        for value in [getattr(obj, name)]
    }
