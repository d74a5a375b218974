"""A tenant's quota: GPUs per flavor (nominal, borrow and lend limits), CPU and memory,
replaced as one document (platform admins only)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction

from tenants.audit import audit_record
from tenants.models import GpuFlavor, Quota, Tenant
from tenants.selectors import unknown_flavor_message
from tenants.services.guards import ensure_visible, require_platform_admin


@dataclass(frozen=True)
class QuotaLine:
    """One flavor's line in a tenant's quota: nominal GPUs, how many it may borrow, and
    how many of its unused nominal GPUs it lends (``None``: all)."""

    flavor: str
    gpus: int
    borrow_limit: int = 0
    lend_limit: int | None = None


def _quota_state(tenant: Tenant) -> dict[str, Any]:
    lines = Quota.objects.for_tenant(tenant).select_related("flavor").order_by("flavor__name")
    return {
        "flavors": [
            {
                "flavor": q.flavor.name,
                "gpus": q.gpus,
                "borrow_limit": q.borrow_limit,
                "lend_limit": q.lend_limit,
            }
            for q in lines
        ],
        "cpu": tenant.cpu_quota,
        "memory_gib": tenant.memory_quota_gib,
    }


@transaction.atomic
def quota_set(
    *, actor: Any, tenant: Tenant, flavors: Sequence[QuotaLine], cpu: int, memory_gib: int
) -> Tenant:
    """Replace the tenant's whole quota at once (platform admins only).

    Flavors left out lose their quota; the audit event holds the quota before and
    after, so one change reads as one event.
    """
    require_platform_admin(actor)
    tenant = Tenant.objects.select_for_update(no_key=True).get(pk=tenant.pk)
    names = [line.flavor for line in flavors]
    known = {f.name: f for f in GpuFlavor.objects.filter(name__in=names)}
    errors: dict[str, list[str]] = {}
    seen: set[str] = set()
    for index, line in enumerate(flavors):
        if line.flavor not in known:
            errors[f"flavors.{index}.flavor"] = [unknown_flavor_message(line.flavor)]
        elif line.flavor in seen:
            errors[f"flavors.{index}.flavor"] = [f"Flavor {line.flavor!r} is listed twice."]
        seen.add(line.flavor)
        if line.lend_limit is not None and line.lend_limit > line.gpus:
            errors[f"flavors.{index}.lend_limit"] = [
                f"A tenant can lend at most its nominal quota: {line.lend_limit} is more "
                f"than the {line.gpus} nominal GPUs on {line.flavor}."
            ]
    if errors:
        raise ValidationError(errors)
    before = _quota_state(tenant)
    Quota.objects.for_tenant(tenant).exclude(flavor__name__in=names).delete()
    existing = {q.flavor_id: q for q in Quota.objects.for_tenant(tenant)}
    for line in flavors:
        flavor = known[line.flavor]
        quota = existing.get(flavor.pk) or Quota(tenant=tenant, flavor=flavor)
        quota.gpus, quota.borrow_limit = line.gpus, line.borrow_limit
        quota.lend_limit = line.lend_limit
        quota.full_clean(validate_unique=False, validate_constraints=False)
        quota.save()
    tenant.cpu_quota, tenant.memory_quota_gib = cpu, memory_gib
    tenant.full_clean()
    tenant.save(update_fields=["cpu_quota", "memory_quota_gib"])
    audit_record(
        actor=actor,
        action="quota.set",
        obj=tenant,
        tenant=tenant,
        object_type="quota",
        data={"before": before, "after": _quota_state(tenant)},
    )
    ensure_visible(actor=actor, tenant=tenant)
    return tenant
