"""Archiving a tenant: the one tenant write that needs to know about its clusters.

A platform admin archives a tenant that holds nothing (no live cluster or job, nothing
still being deleted): it keeps its rows, audit trail and usage history for chargeback,
takes no new requests, and can be restored. It lives here, above ``tenants``, because
only ``clusters`` knows what a tenant holds (the layers in ``.importlinter``).
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import Count
from django.utils import timezone

from clusters.domain.states import LIVE, State
from clusters.models import ClusterRequest
from controlplane.exceptions import ServiceConflict
from tenants.audit import audit_record
from tenants.models import Tenant
from tenants.selectors import is_platform_admin

HOLDING = frozenset({*LIVE, State.DELETING})


def tenant_holdings(tenant: Tenant) -> dict[str, int]:
    """The tenant's requests that still hold or may take GPUs, counted per state."""
    rows = (
        ClusterRequest.objects.for_tenant(tenant)
        .filter(state__in=HOLDING)
        .values("state")
        .annotate(n=Count("id"))
    )
    return {row["state"]: row["n"] for row in rows}


@transaction.atomic
def tenant_archive(*, actor: Any, tenant: Tenant) -> Tenant:
    """Archive ``tenant`` if it holds nothing (platform admins only)."""
    if not is_platform_admin(actor):
        raise PermissionDenied("Only platform admins may archive a tenant.")
    tenant = Tenant.objects.select_for_update(no_key=True).get(pk=tenant.pk)
    if tenant.archived_at is not None:
        return tenant
    held = tenant_holdings(tenant)
    if held:
        what = ", ".join(f"{n} {state}" for state, n in sorted(held.items()))
        raise ServiceConflict(
            f"{tenant.slug} still has requests that hold or wait for GPUs ({what}); "
            "delete them first.",
            code="tenant_not_empty",
        )
    tenant.archived_at = timezone.now()
    tenant.save(update_fields=["archived_at"])
    audit_record(actor=actor, action="tenant.archive", obj=tenant, tenant=tenant)
    return tenant


@transaction.atomic
def tenant_restore(*, actor: Any, tenant: Tenant) -> Tenant:
    """Take ``tenant`` out of the archive: it takes requests again (platform admins)."""
    if not is_platform_admin(actor):
        raise PermissionDenied("Only platform admins may restore a tenant.")
    tenant = Tenant.objects.select_for_update(no_key=True).get(pk=tenant.pk)
    if tenant.archived_at is None:
        return tenant
    tenant.archived_at = None
    tenant.save(update_fields=["archived_at"])
    audit_record(actor=actor, action="tenant.restore", obj=tenant, tenant=tenant)
    return tenant
