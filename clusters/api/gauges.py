"""The clusters app's database-derived gauges, recomputed at each ``/metrics`` scrape.

Registered with :func:`controlplane.metrics.on_scrape` in ``ClustersConfig.ready()``.
Each gauge is one grouped query; it is cleared first so that a tenant or state with no
rows left stops being reported rather than keeping its last value. A scrape sees the
whole platform (every tenant).
"""

from __future__ import annotations

from decimal import Decimal

from django.db.models import Count, Sum
from django.utils import timezone

from clusters.domain.states import State
from clusters.models import ClusterRequest, IdleSpan, PendingPass
from controlplane.metrics import (
    CLUSTERS,
    GPUS_BORROWED,
    GPUS_GUARANTEED,
    GPUS_HELD,
    GPUS_IDLE,
    PASS_PENDING,
    QUEUE_DEPTH,
)
from tenants.models import Quota

# A queued request that has not been looked at yet has no queue_reason.
_NOT_YET = "pending"


def refresh_cluster_gauges() -> None:
    """Set the clusters' gauges: requests per state, the queue, GPUs by tenant and flavor."""
    CLUSTERS.clear()
    for row in (
        ClusterRequest.objects.unscoped()
        .values("tenant__slug", "state")
        .annotate(n=Count("id"))
        .order_by()
    ):
        CLUSTERS.labels(row["tenant__slug"], row["state"]).set(row["n"])
    QUEUE_DEPTH.clear()
    for row in (
        ClusterRequest.objects.unscoped()
        .filter(state=State.QUEUED)
        .values("tenant__slug", "flavor__name", "queue_reason")
        .annotate(n=Count("id"))
        .order_by()
    ):
        reason = row["queue_reason"] or _NOT_YET
        QUEUE_DEPTH.labels(row["tenant__slug"], row["flavor__name"], reason).set(row["n"])
    _refresh_gpus()
    _refresh_passes()


def _refresh_gpus() -> None:
    """GPUs held, guaranteed (nominal quota), borrowed (held beyond it) and idle."""
    held: dict[tuple[str, str], Decimal] = {}
    for row in (
        ClusterRequest.objects.unscoped()
        .filter(holds_gpus=True)
        .values("tenant__slug", "flavor__name")
        .annotate(g=Sum("gpus"))
        .order_by()
    ):
        held[(row["tenant__slug"], row["flavor__name"])] = row["g"] or Decimal(0)
    guaranteed = {
        (slug, flavor): gpus
        for slug, flavor, gpus in Quota.objects.unscoped().values_list(
            "tenant__slug", "flavor__name", "gpus"
        )
    }
    GPUS_HELD.clear()
    GPUS_GUARANTEED.clear()
    GPUS_BORROWED.clear()
    for key, gpus in held.items():
        GPUS_HELD.labels(*key).set(float(gpus))
    for key, gpus in guaranteed.items():
        GPUS_GUARANTEED.labels(*key).set(gpus)
    for key in held.keys() | guaranteed.keys():
        borrowed = max(Decimal(0), held.get(key, Decimal(0)) - guaranteed.get(key, 0))
        GPUS_BORROWED.labels(*key).set(float(borrowed))
    GPUS_IDLE.clear()
    for row in (
        IdleSpan.objects.unscoped()
        .filter(ended_at__isnull=True)
        .values("tenant__slug", "flavor_name")
        .annotate(g=Sum("gpus"))
        .order_by()
    ):
        GPUS_IDLE.labels(row["tenant__slug"], row["flavor_name"]).set(float(row["g"] or 0))


def _refresh_passes() -> None:
    """How long each pass asked for has waited to start (the engine's lag)."""
    now = timezone.now()
    PASS_PENDING.clear()
    for name, requested_at in PendingPass.objects.values_list("name", "requested_at"):
        waited = (now - requested_at).total_seconds() if requested_at else 0.0
        PASS_PENDING.labels(name).set(max(0.0, waited))
