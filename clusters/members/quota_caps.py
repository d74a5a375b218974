"""Caps on a tenant's quota per member of the fleet: at most so many GPUs of a flavor
held on one Kubernetes cluster (platform admins only). The quota stays fleet-wide;
admission's placement honours the caps (clusters/admission/placement.py)."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import QuerySet

from clusters.models import KubeCluster, MemberQuotaCap
from tenants.audit import audit_record
from tenants.models import GpuFlavor, Tenant
from tenants.selectors import unknown_flavor_message
from tenants.services.guards import require_platform_admin

MOST_GPUS = 1_000_000


def quota_cap_list(*, tenant: Tenant | None = None) -> QuerySet[MemberQuotaCap]:
    """Every cap (or ``tenant``'s), by tenant, member in placement order, then flavor."""
    caps = MemberQuotaCap.objects.select_related("tenant", "kube_cluster", "flavor")
    return caps.filter(tenant=tenant) if tenant is not None else caps.all()


def _resolve(tenant: str, kube_cluster: str, flavor: str) -> tuple[Tenant, KubeCluster, GpuFlavor]:
    """The rows the names name, or a ValidationError naming every unknown one."""
    errors: dict[str, list[str]] = {}
    row_tenant = Tenant.objects.unscoped().filter(slug=tenant).first()
    if row_tenant is None:
        errors["tenant"] = [f"There is no tenant called {tenant!r}."]
    member = KubeCluster.objects.filter(name=kube_cluster).first()
    if member is None:
        names = ", ".join(KubeCluster.objects.values_list("name", flat=True)) or "none"
        errors["kube_cluster"] = [
            f"There is no Kubernetes cluster called {kube_cluster!r} in the fleet "
            f"(there are: {names})."
        ]
    row_flavor = GpuFlavor.objects.filter(name=flavor).first()
    if row_flavor is None:
        errors["flavor"] = [unknown_flavor_message(flavor)]
    if errors:
        raise ValidationError(errors)
    assert row_tenant and member and row_flavor
    return row_tenant, member, row_flavor


@transaction.atomic
def quota_cap_set(
    *, actor: Any, tenant: str, kube_cluster: str, flavor: str, gpus: int | None
) -> MemberQuotaCap | None:
    """Cap what ``tenant`` may hold of ``flavor`` on ``kube_cluster`` at ``gpus``, or
    remove the cap (``gpus`` ``None``); platform admins only. What already runs over a
    new cap keeps running: the cap stops new placements there."""
    require_platform_admin(actor)
    if gpus is not None and (isinstance(gpus, bool) or not isinstance(gpus, int)):
        raise ValidationError({"gpus": ["A whole number of GPUs, or null for no cap."]})
    if gpus is not None and not 0 <= gpus <= MOST_GPUS:
        raise ValidationError({"gpus": [f"A cap is between 0 and {MOST_GPUS} GPUs."]})
    row_tenant, member, row_flavor = _resolve(tenant, kube_cluster, flavor)
    data = {"kube_cluster": member.name, "flavor": row_flavor.name, "gpus": gpus}
    if gpus is None:
        MemberQuotaCap.objects.filter(
            kube_cluster=member, tenant=row_tenant, flavor=row_flavor
        ).delete()
        audit_record(actor=actor, action="quota.cap_remove", tenant=row_tenant, data=data)
        return None
    cap, _ = MemberQuotaCap.objects.update_or_create(
        kube_cluster=member, tenant=row_tenant, flavor=row_flavor, defaults={"gpus": gpus}
    )
    audit_record(actor=actor, action="quota.cap_set", obj=cap, tenant=row_tenant, data=data)
    return cap
