"""Reads of the fleet's members for the pages, the API and the command."""

from __future__ import annotations

from django.db.models import QuerySet

from clusters.domain.states import State
from clusters.models import ClusterRequest, FlavorStock, KubeCluster


def kube_cluster_list() -> QuerySet[KubeCluster]:
    """Every member in placement order, with its allow-list loaded."""
    return KubeCluster.objects.prefetch_related("allowed_tenants").order_by(
        "placement_order", "name"
    )


def kube_cluster_references(*, member: KubeCluster) -> tuple[int, int]:
    """How many requests not yet deleted are placed on ``member``, and how many waiting
    ones ask for it by name: while either is not zero it cannot be removed."""
    rows = ClusterRequest.objects.unscoped().exclude(state=State.DELETED)
    return (
        rows.filter(kube_cluster=member).count(),
        rows.filter(wanted_kube_cluster=member, kube_cluster__isnull=True).count(),
    )


def kube_cluster_stock(*, member: KubeCluster) -> QuerySet[FlavorStock]:
    """Each flavor's nodes in ``member``, by flavor name."""
    return member.stock.select_related("flavor").order_by("flavor__name")
