"""A flavor's nodes per member of the fleet, and the flavor's totals kept equal to their
sums: the one writer of ``FlavorStock`` node counts and of a stocked flavor's own
``node_count`` and ``max_node_count`` (platform admins, and make run's seed)."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction

from clusters.models import FlavorStock, KubeCluster
from tenants.audit import audit_record
from tenants.models import GpuFlavor
from tenants.services.guards import require_platform_admin


def flavor_totals(flavor: GpuFlavor) -> GpuFlavor:
    """Set ``flavor``'s node counts to the sums over its members' stock (a member whose
    group cannot grow counts its nodes in the maximum); a flavor no member lists keeps
    its own. Runs in the caller's transaction, with the flavor row locked."""
    rows = list(FlavorStock.objects.filter(flavor=flavor).values("node_count", "max_node_count"))
    if not rows:
        return flavor
    GpuFlavor.objects.select_for_update().filter(pk=flavor.pk).first()
    flavor.node_count = sum(r["node_count"] for r in rows)
    grows = any((r["max_node_count"] or 0) > r["node_count"] for r in rows)
    flavor.max_node_count = (
        sum(max(r["max_node_count"] or 0, r["node_count"]) for r in rows) if grows else None
    )
    flavor.save(update_fields=["node_count", "max_node_count"])
    return flavor


@transaction.atomic
def stock_set(
    *,
    actor: Any,
    member: KubeCluster,
    flavor: GpuFlavor,
    node_count: int | None,
    max_node_count: int | None = None,
) -> FlavorStock | None:
    """List ``node_count`` nodes of ``flavor`` on ``member`` (at most ``max_node_count``
    when its node group autoscales), or none (``node_count`` ``None``: the member no longer
    has the flavor); the flavor's totals move with it (platform admins; ``actor`` ``None``
    is make run's seed)."""
    if actor is not None:
        require_platform_admin(actor)
    where = {"kube_cluster": member, "flavor": flavor}
    if node_count is None:
        FlavorStock.objects.filter(**where).delete()
        stock = None
    else:
        stock = FlavorStock.objects.filter(**where).first() or FlavorStock(**where)
        stock.node_count = node_count
        stock.max_node_count = max_node_count
        stock.full_clean(exclude=["kube_cluster", "flavor"])
        if max_node_count is not None and max_node_count < node_count:
            raise ValidationError(
                {"max_node_count": ["The maximum cannot be below the node count."]}
            )
        stock.save()
    flavor_totals(flavor)
    if actor is not None:
        audit_record(
            actor=actor,
            action="kube_cluster.stock",
            obj=member,
            data={
                "flavor": flavor.name,
                "node_count": node_count,
                "max_node_count": max_node_count,
            },
        )
    return stock
