"""Reads about cluster requests, shared by the API, the dashboard and tasks."""

from __future__ import annotations

from typing import Any

from django.db.models import Prefetch, QuerySet

from clusters.models import ClusterEvent, ClusterRequest
from tenants.models import Tenant


def cluster_list(*, tenant: Tenant) -> QuerySet[ClusterRequest]:
    """A tenant's cluster requests with what their representation needs, in one query."""
    return (
        ClusterRequest.objects.for_tenant(tenant)
        .select_related("tenant", "flavor", "owner")
        .order_by("-created_at", "-id")
    )


def cluster_detail_queryset(*, tenant: Tenant) -> QuerySet[ClusterRequest]:
    """Like :func:`cluster_list`, with the event history prefetched."""
    return cluster_list(tenant=tenant).prefetch_related(
        Prefetch("events", queryset=ClusterEvent.objects.order_by("at", "id"))
    )


def cluster_endpoints(cluster: ClusterRequest) -> dict[str, Any] | None:
    """How to reach a ready cluster: dashboard URL, Ray client address and a snippet.

    Addresses are in-cluster service names: the tenant's NetworkPolicies admit the
    control plane's namespace and the tenant's own pods to these ports, no one else.
    """
    if cluster.state != "ready":
        return None
    host = f"{cluster.name}-head-svc.{cluster.namespace}.svc"
    client_address = f"ray://{host}:10001"
    return {
        "dashboard_url": f"http://{host}:8265",
        "client_address": client_address,
        "snippet": f'import ray\nray.init("{client_address}")',
    }
