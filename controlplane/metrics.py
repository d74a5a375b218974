"""Prometheus metrics of the control plane.

Gauges that describe the database (clusters per state, GPUs held) are computed when
``/metrics`` is scraped, with one grouped query each, so they are always true and cost
nothing between scrapes. Counters are incremented where the event happens.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge

REGISTRY = CollectorRegistry(auto_describe=True)

CLUSTERS = Gauge(
    "gangway_clusters",
    "Cluster requests by tenant and state",
    ["tenant", "state"],
    registry=REGISTRY,
)
GPUS_HELD = Gauge(
    "gangway_gpus_held", "GPUs held by admitted clusters", ["tenant", "flavor"], registry=REGISTRY
)
TENANTS = Gauge("gangway_tenants", "Number of tenants", registry=REGISTRY)
API_ERRORS = Counter(
    "gangway_kube_errors_total", "Kubernetes API errors by class", ["kind"], registry=REGISTRY
)
ADMISSION_PASSES = Counter(
    "gangway_admission_passes_total", "Admission passes run", registry=REGISTRY
)
ADMITTED = Counter(
    "gangway_admitted_total", "Cluster requests admitted", ["tenant"], registry=REGISTRY
)


def refresh_gauges() -> None:
    """Recompute the database-derived gauges (called on scrape)."""
    from django.db.models import Count, Sum

    from clusters.models import ClusterRequest
    from tenants.models import Tenant

    TENANTS.set(Tenant.objects.unscoped().count())
    CLUSTERS.clear()
    for row in (
        ClusterRequest.objects.unscoped()
        .values("tenant__slug", "state")
        .annotate(n=Count("id"))
        .order_by()
    ):
        CLUSTERS.labels(row["tenant__slug"], row["state"]).set(row["n"])
    GPUS_HELD.clear()
    for row in (
        ClusterRequest.objects.unscoped()
        .filter(holds_gpus=True)
        .values("tenant__slug", "flavor__name")
        .annotate(g=Sum("gpus"))
        .order_by()
    ):
        GPUS_HELD.labels(row["tenant__slug"], row["flavor__name"]).set(float(row["g"] or 0))
