"""A change to some fields of a row, checked, saved and audited with the values before
and after: what every "update" service of the tenants app does once it is allowed."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from django.db import models

from tenants.audit import audit_record, audit_snapshot
from tenants.models import Tenant


def edit_and_audit(
    *,
    actor: Any,
    obj: models.Model,
    changes: Mapping[str, Any],
    fields: Sequence[str],
    check: Callable[[Any], None],
    action: str,
    tenant: Tenant | None = None,
) -> None:
    """Set ``fields`` of ``obj`` from ``changes``, run ``check`` on it (which raises
    ``ValidationError``), save only those fields and record ``action``."""
    before = audit_snapshot(obj, fields)
    for name in fields:
        setattr(obj, name, changes[name])
    check(obj)
    obj.save(update_fields=fields or None)
    audit_record(
        actor=actor,
        action=action,
        obj=obj,
        tenant=tenant,
        data={"before": before, "after": audit_snapshot(obj, fields)},
    )
