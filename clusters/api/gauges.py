"""The clusters app's database-derived gauges, recomputed at each ``/metrics`` scrape.

Registered with :func:`controlplane.metrics.on_scrape` in ``ClustersConfig.ready()``.
Each gauge is one grouped query; it is cleared first so that a tenant or state with no
rows left stops being reported rather than keeping its last value.
"""

from __future__ import annotations

from django.db.models import Count, Sum

from clusters.models import ClusterRequest
from controlplane.metrics import CLUSTERS, GPUS_HELD


def refresh_cluster_gauges() -> None:
    """Set cluster requests per tenant and state, and GPUs held per tenant and flavor
    (every tenant: a scrape sees the whole platform)."""
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
