"""Writing audit events. Called by services inside their transaction (STYLE 5)."""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from typing import Any, Required, TypedDict, Unpack

from django.db import models, transaction

from controlplane.middleware import current_request_id
from tenants.models import AuditEvent, Tenant


class AuditFields(TypedDict, total=False):
    """What an audit record says (:func:`audit_record`)."""

    actor: Required[Any]
    action: Required[str]
    obj: models.Model | None
    tenant: Tenant | None
    object_type: str
    object_id: str
    object_repr: str
    data: dict[str, Any] | None
    actor_name: str


def audit_record(**fields: Unpack[AuditFields]) -> AuditEvent:
    """Record that ``actor`` did ``action`` to ``obj``; must run inside the change's transaction.

    ``actor`` is a user or ``None`` for the system (tasks, the admission pass);
    ``actor_name`` names an actor without an account (``anonymous`` for a failed
    sign-in). The request id comes from the current request, so an audit row can be
    matched to logs.
    """
    entry = audit_entry(**fields)
    entry.save()
    return entry


def audit_entry(**fields: Unpack[AuditFields]) -> AuditEvent:
    """The record :func:`audit_record` writes, unsaved, for a change that inserts it with
    its own rows (``controlplane.inserts`` fills in a new ``obj``'s id); made, as there,
    inside the change's transaction."""
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("audit_record must be called inside the transaction of the change")
    actor, obj, tenant = fields["actor"], fields.get("obj"), fields.get("tenant")
    object_type = fields.get("object_type", "")
    object_id = fields.get("object_id", "")
    object_repr = fields.get("object_repr", "")
    user = actor if getattr(actor, "is_authenticated", False) else None
    if obj is not None:
        object_type = object_type or obj._meta.model_name or ""
        object_id = object_id or ("" if obj.pk is None else str(obj.pk))
        object_repr = object_repr or str(obj)[:200]
    return AuditEvent(
        actor=user,
        actor_name=user.get_username() if user else (fields.get("actor_name") or "system"),
        action=fields["action"],
        tenant=tenant,
        tenant_slug=tenant.slug if tenant else "",
        object_type=object_type,
        object_id=object_id,
        object_repr=object_repr[:200],
        request_id=current_request_id(),
        data=fields.get("data") or {},
    )


def audit_snapshot(obj: Any, fields: Sequence[str]) -> dict[str, Any]:
    """``obj``'s ``fields`` as an audit event's JSON data; decimals (a tenant's weight)
    are kept exact, as strings."""
    return {
        name: str(value) if isinstance(value, Decimal) else value
        for name in fields
        for value in [getattr(obj, name)]
    }
