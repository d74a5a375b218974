"""Writes of showback (docs/cost.md): flavor prices (platform admins) and money caps
(a tenant's admins, or platform admins). Keyword-only, atomic, validated (a bad value is
a ``ValidationError`` naming its field and changes nothing) and audited."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from clusters.models import CostCap, FlavorPrice
from tenants.audit import audit_record
from tenants.models import GpuFlavor, Role, Tenant
from tenants.selectors import has_role, is_platform_admin

MAX_AMOUNT = Decimal("1000000000")


def _amount(value: Any, field: str, *, required: bool) -> Decimal | None:
    if value is None or value == "":
        if required:
            raise ValidationError({field: "This field is required."})
        return None
    try:
        amount = Decimal(str(value))
    except ArithmeticError:
        raise ValidationError({field: "Enter a number."}) from None
    if not amount.is_finite() or amount < 0 or amount >= MAX_AMOUNT:
        raise ValidationError({field: f"Enter an amount from 0 to under {MAX_AMOUNT:,}."})
    if amount != amount.quantize(Decimal("0.0001")):
        raise ValidationError({field: "At most 4 decimal places."})
    return amount


@transaction.atomic
def flavor_price_set(
    *,
    actor: Any,
    flavor: str,
    price_per_gpu_hour: Any,
    borrowed_price_per_gpu_hour: Any = None,
    effective_from: datetime | None = None,
) -> FlavorPrice:
    """Price a flavor's GPU-hour from ``effective_from`` (default now) on; a price of
    the same flavor and moment is replaced. Platform admins only."""
    if not is_platform_admin(actor):
        raise PermissionDenied("Only platform admins set prices.")
    if not GpuFlavor.objects.filter(name=flavor).exists():
        raise ValidationError({"flavor": f"No flavor named {flavor!r} in the catalogue."})
    price = _amount(price_per_gpu_hour, "price_per_gpu_hour", required=True)
    borrowed = _amount(borrowed_price_per_gpu_hour, "borrowed_price_per_gpu_hour", required=False)
    at = effective_from or timezone.now()
    if timezone.is_naive(at):
        raise ValidationError({"effective_from": "Give a time zone (e.g. Z for UTC)."})
    row, _ = FlavorPrice.objects.update_or_create(
        flavor_name=flavor,
        effective_from=at,
        defaults={
            "price_per_gpu_hour": price,
            "borrowed_price_per_gpu_hour": borrowed,
            "created_by": actor,
        },
    )
    audit_record(
        actor=actor,
        action="price.set",
        obj=row,
        data={
            "flavor": flavor,
            "price_per_gpu_hour": str(price),
            "borrowed_price_per_gpu_hour": None if borrowed is None else str(borrowed),
            "effective_from": at.isoformat(),
        },
    )
    return row


def _may_cap(actor: Any, tenant: Tenant) -> None:
    if not (is_platform_admin(actor) or has_role(user=actor, tenant=tenant, at_least=Role.ADMIN)):
        raise PermissionDenied("Only the tenant's admins set its cost caps.")


@transaction.atomic
def cost_cap_set(
    *, actor: Any, tenant: Tenant, username: str = "", soft_limit: Any, hard_limit: Any
) -> CostCap | None:
    """Set the monthly cost cap of the tenant (``username`` empty) or of one of its
    members; with neither limit the cap is removed (``None`` returned). A changed cap
    may be told again this month when its new limit is crossed."""
    _may_cap(actor, tenant)
    username = (username or "").strip()
    if username and not tenant.memberships.filter(user__username=username).exists():
        raise ValidationError({"username": f"{username!r} is not a member of {tenant.slug}."})
    soft = _amount(soft_limit, "soft_limit", required=False)
    hard = _amount(hard_limit, "hard_limit", required=False)
    if soft is not None and hard is not None and soft > hard:
        raise ValidationError({"soft_limit": "The soft limit is at most the hard limit."})
    data = {
        "username": username,
        "soft_limit": None if soft is None else str(soft),
        "hard_limit": None if hard is None else str(hard),
    }
    if soft is None and hard is None:
        CostCap.objects.for_tenant(tenant).filter(username=username).delete()
        audit_record(actor=actor, action="cost_cap.remove", tenant=tenant, data=data)
        return None
    cap, _ = CostCap.objects.update_or_create(
        tenant=tenant,
        username=username,
        defaults={"soft_limit": soft, "hard_limit": hard, "notified_month": None},
    )
    audit_record(actor=actor, action="cost_cap.set", obj=cap, tenant=tenant, data=data)
    return cap
