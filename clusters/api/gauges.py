"""The clusters app's database-derived gauges, recomputed at each ``/metrics`` scrape.

Registered with :func:`controlplane.metrics.on_scrape` in ``ClustersConfig.ready()``.
Each gauge is one grouped query; it is cleared first so that a tenant or state with no
rows left stops being reported rather than keeping its last value. A scrape sees the
whole platform (every tenant).
"""

from __future__ import annotations

import time
from collections import defaultdict
from decimal import Decimal
from typing import Any

from django.db.models import Count, QuerySet, Sum
from django.utils import timezone

from clusters.domain.states import State
from clusters.models import ClusterRequest, CostCap, IdleSpan, PendingPass
from clusters.rows.costs import cost_rows
from clusters.rows.usage import month_start
from controlplane.metrics import (
    BUDGET,
    CLUSTERS,
    GPUS_BORROWED,
    GPUS_GUARANTEED,
    GPUS_HELD,
    GPUS_IDLE,
    MONTH_COST,
    MONTH_GPU_HOURS,
    PASS_PENDING,
    QUEUE_DEPTH,
)
from tenants.models import Quota, Tenant

# The month's spend reads every usage span of the month: recomputed at most this often,
# not at every scrape (Prometheus scrapes every 15-60 s; a minute-old spend is as good).
MONTH_REFRESH_SECONDS = 60.0
_month_read_at: float | None = None

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
    _refresh_month()


def _refresh_gpus() -> None:
    """GPUs held, guaranteed (nominal quota), borrowed (held beyond it) and idle."""
    held = _gpus_by_tenant_and_flavor(
        ClusterRequest.objects.unscoped().filter(holds_gpus=True), "flavor__name"
    )
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
    idle = IdleSpan.objects.unscoped().filter(ended_at__isnull=True)
    for key, gpus in _gpus_by_tenant_and_flavor(idle, "flavor_name").items():
        GPUS_IDLE.labels(*key).set(float(gpus))


def _gpus_by_tenant_and_flavor(rows: QuerySet[Any], flavor: str) -> dict[tuple[str, str], Decimal]:
    """The ``gpus`` of ``rows`` summed per tenant slug and flavor name (``flavor``: the
    field that names it), in one query."""
    return {
        (row["tenant__slug"], row[flavor]): row["g"] or Decimal(0)
        for row in rows.values("tenant__slug", flavor).annotate(g=Sum("gpus")).order_by()
    }


def _refresh_passes() -> None:
    """How long each pass asked for has waited to start (the engine's lag)."""
    now = timezone.now()
    PASS_PENDING.clear()
    for name, requested_at in PendingPass.objects.values_list("name", "requested_at"):
        waited = (now - requested_at).total_seconds() if requested_at else 0.0
        PASS_PENDING.labels(name).set(max(0.0, waited))


def _refresh_month() -> None:
    """This UTC month's GPU-hours and cost per tenant, and each tenant's budgets (three
    queries, at most once a :data:`MONTH_REFRESH_SECONDS`)."""
    global _month_read_at
    if _month_read_at is not None and time.monotonic() - _month_read_at < MONTH_REFRESH_SECONDS:
        return
    _month_read_at = time.monotonic()
    now = timezone.now()
    hours: dict[str, Decimal] = defaultdict(Decimal)
    cost: dict[str, Decimal] = defaultdict(Decimal)
    for row in cost_rows(tenant=None, since=month_start(now), until=now, now=now):
        hours[row.tenant] += row.gpu_hours
        cost[row.tenant] += row.cost
    MONTH_GPU_HOURS.clear()
    MONTH_COST.clear()
    for slug in hours:
        MONTH_GPU_HOURS.labels(slug).set(float(hours[slug]))
        MONTH_COST.labels(slug).set(float(cost[slug]))
    BUDGET.clear()
    budgets = Tenant.objects.unscoped().filter(monthly_gpu_hour_budget__isnull=False)
    for slug, budget in budgets.values_list("slug", "monthly_gpu_hour_budget"):
        BUDGET.labels(slug, "gpu_hours").set(float(budget or 0))
    for slug, soft, hard in (
        CostCap.objects.unscoped()
        .filter(username="")
        .values_list("tenant__slug", "soft_limit", "hard_limit")
    ):
        if soft is not None:
            BUDGET.labels(slug, "cost_soft").set(float(soft))
        if hard is not None:
            BUDGET.labels(slug, "cost_hard").set(float(hard))


def forget_month() -> None:
    """Make the next scrape read the month again (tests, after they change usage)."""
    global _month_read_at
    _month_read_at = None
