"""Recent GPU-hours for usage-decayed fair share, read from the usage ledger.

:func:`read_recent_usage` sums every :class:`~clusters.models.UsageSpan` into decayed
GPU-hours per (tenant, flavor, engineer) in one aggregate query on PostgreSQL (the
closed form of :func:`clusters.admission.decayed_usage.decayed_gpu_hours`), so a pass
pays one query however long the history; elsewhere Python sums the spans. Spans ended
more than :data:`HORIZON_HALF_LIVES` half-lives ago are skipped (they weigh under one
part in 10^12), and older starts are clipped there, which keeps ``EXP`` from underflowing.
"""

from __future__ import annotations

import math
from collections import defaultdict
from datetime import datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.db import connection
from django.db.models import Q
from django.utils import timezone

from clusters.admission.decayed_usage import (
    LN2,
    RecentUsage,
    Span,
    recent_usage,
    standing_sentence,
)
from clusters.models import ClusterRequest, UsageSpan
from tenants.models import Tenant

HORIZON_HALF_LIVES = 40


def half_life() -> timedelta | None:
    """The configured half-life (``FAIR_SHARE_HALF_LIFE_HOURS``), ``None`` when off."""
    hours = float(settings.FAIR_SHARE_HALF_LIFE_HOURS)
    return timedelta(hours=hours) if hours > 0 else None


def read_recent_usage(*, now: datetime, half_life: timedelta | None) -> RecentUsage:
    """Decayed GPU-hours at ``now`` per (tenant, flavor) and per (tenant, engineer id);
    off (no query) without a half-life."""
    if half_life is None:
        return RecentUsage()
    since = now - HORIZON_HALF_LIVES * half_life
    if connection.vendor != "postgresql":
        return recent_usage(_spans(now=now, since=since), now=now, half_life=half_life)
    rate = LN2 / half_life.total_seconds()
    sql = f"""
        SELECT t.slug, s.flavor_name, COALESCE(c.owner_id, 0),
               SUM(s.gpus::float8 * (
                   EXP(-%(rate)s * EXTRACT(EPOCH FROM
                       (%(now)s - LEAST(COALESCE(s.ended_at, %(now)s), %(now)s)))::float8)
                 - EXP(-%(rate)s * EXTRACT(EPOCH FROM
                       (%(now)s - GREATEST(s.started_at, %(since)s)))::float8)))
        FROM {UsageSpan._meta.db_table} s
        JOIN {Tenant._meta.db_table} t ON t.id = s.tenant_id
        JOIN {ClusterRequest._meta.db_table} c ON c.id = s.cluster_id
        WHERE (s.ended_at IS NULL OR s.ended_at > %(since)s) AND s.started_at < %(now)s
        GROUP BY 1, 2, 3
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, {"rate": rate, "now": now, "since": since})
        rows = cursor.fetchall()
    # The SQL sums ``gpus * (decay(end) - decay(start))``; times the mean life in hours.
    tau = half_life.total_seconds() / LN2 / 3600
    by_flavor: dict[tuple[str, str], float] = defaultdict(float)
    by_owner: dict[tuple[str, int], float] = defaultdict(float)
    for slug, flavor, owner, summed in rows:
        hours = max(float(summed or 0.0), 0.0) * tau
        if not math.isfinite(hours) or hours <= 0:
            continue
        by_flavor[slug, flavor] += hours
        by_owner[slug, int(owner)] += hours
    return RecentUsage(half_life, dict(by_flavor), dict(by_owner))


def _spans(*, now: datetime, since: datetime) -> list[Span]:
    """The spans that still weigh, clipped at ``since`` (the non-PostgreSQL path)."""
    rows = (
        UsageSpan.objects.unscoped()
        .filter(Q(ended_at__isnull=True) | Q(ended_at__gt=since), started_at__lt=now)
        .values_list(
            "tenant__slug", "cluster__owner_id", "flavor_name", "gpus", "started_at", "ended_at"
        )
    )
    return [
        Span(slug, owner or 0, flavor, Decimal(gpus), max(start, since), end)
        for slug, owner, flavor, gpus, start, end in rows
    ]


def tenant_standing(tenant: Tenant) -> str:
    """What the tenant's recent usage does to its waiting requests, in a sentence for
    its own pages ("" when usage-decayed fair share is off: no query then)."""
    span = half_life()
    if span is None:
        return ""
    recent = read_recent_usage(now=timezone.now(), half_life=span)
    weights = dict(
        Tenant.objects.unscoped().filter(cohort=tenant.cohort).values_list("slug", "weight")
    )
    return standing_sentence(str(tenant.slug), recent, weights)
