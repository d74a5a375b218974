"""GPU-hours over time and monthly budgets: the usage ledger read by day.

The ledger is :class:`~clusters.models.UsageSpan` (GPUs held) and
:class:`~clusters.models.IdleSpan` (held while Ray showed no use). These reads cut each
span at UTC midnights into per-day buckets: a span that crosses midnight counts on both
days, and an open span (``ended_at`` empty) runs to now. They read each ledger in one
query and bucket in Python, so the query count does not grow with the rows; the
bucketing is the same on PostgreSQL and on the SQLite of ``make run``.

The budget reads (:func:`budget_status`, :func:`budget_deprioritises`) are what the
dashboard's banner, the create service and the dry-run share.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from clusters.models import ClusterKind, IdleSpan, UsageSpan
from tenants.models import Tenant

# The periods a usage report offers, in days (today included), and the default.
USAGE_WINDOWS = (7, 30, 90)
DEFAULT_WINDOW = 30
# A tenant's pages warn from this fraction of its monthly budget on.
BUDGET_WARN_FRACTION = Decimal("0.8")
BUDGET_OVER_MESSAGE = "Over budget: this request will queue at the lowest priority"
_HOUR = Decimal(3600)


def parse_window(value: Any) -> int:
    """A usage window in days from a query parameter: one of :data:`USAGE_WINDOWS`,
    else :data:`DEFAULT_WINDOW`."""
    try:
        days = int(value)
    except (TypeError, ValueError):
        return DEFAULT_WINDOW
    return days if days in USAGE_WINDOWS else DEFAULT_WINDOW


def window_start(*, days: int, now: datetime) -> datetime:
    """UTC midnight that opens a window of ``days`` calendar days ending today."""
    first = now.astimezone(UTC).date() - timedelta(days=days - 1)
    return datetime.combine(first, time.min, tzinfo=UTC)


@dataclass(frozen=True)
class DayUsage:
    """GPU-hours of one tenant's user on one flavor on one UTC day; ``idle_hours`` is
    the part held while Ray showed no use (never more than ``gpu_hours``)."""

    day: date
    tenant: str
    user: str
    flavor: str
    gpu_hours: Decimal
    idle_hours: Decimal

    @property
    def active_hours(self) -> Decimal:
        return self.gpu_hours - self.idle_hours


def _day_pieces(start: datetime, stop: datetime) -> Iterator[tuple[date, Decimal]]:
    """``[start, stop)`` cut at UTC midnights: each day with its seconds in it."""
    start, stop = start.astimezone(UTC), stop.astimezone(UTC)
    while start < stop:
        midnight = datetime.combine(start.date() + timedelta(days=1), time.min, tzinfo=UTC)
        end = min(midnight, stop)
        yield start.date(), Decimal((end - start).total_seconds())
        start = end


def _bucket(
    spans: Any, since: datetime, end: datetime
) -> dict[tuple[date, str, str, str], Decimal]:
    """GPU-hours of ``spans`` inside ``[since, end)`` by (day, tenant, user, flavor)."""
    buckets: dict[tuple[date, str, str, str], Decimal] = defaultdict(Decimal)
    rows = spans.filter(
        Q(ended_at__isnull=True) | Q(ended_at__gt=since), started_at__lt=end
    ).values_list("tenant__slug", "username", "flavor_name", "gpus", "started_at", "ended_at")
    for tenant, user, flavor, gpus, started_at, ended_at in rows:
        for day, seconds in _day_pieces(max(started_at, since), min(ended_at or end, end)):
            buckets[day, tenant, user, flavor] += gpus * seconds / _HOUR
    return buckets


def daily_usage(
    *, tenant: Tenant | None, since: datetime, until: datetime, now: datetime | None = None
) -> list[DayUsage]:
    """GPU-hours per UTC day, tenant, user and flavor between ``since`` and ``until``
    (a tenant's, or every tenant's when ``None``), each split into active and idle.

    Open spans run to ``until`` or now, whichever is earlier. Two queries whatever the
    number of spans; rows are sorted by day, tenant, user and flavor, and only
    (day, tenant, user, flavor) that used GPUs appear.
    """
    end = min(until, now or timezone.now())
    usage = UsageSpan.objects.unscoped() if tenant is None else UsageSpan.objects.for_tenant(tenant)
    idle = IdleSpan.objects.unscoped() if tenant is None else IdleSpan.objects.for_tenant(tenant)
    used = _bucket(usage, since, end)
    idled = _bucket(idle, since, end)
    return [
        DayUsage(
            day=key[0],
            tenant=key[1],
            user=key[2],
            flavor=key[3],
            gpu_hours=hours,
            # An idle span never outlasts the GPUs it was idle with.
            idle_hours=min(idled.get(key, Decimal(0)), hours),
        )
        for key, hours in sorted(used.items())
        if hours > 0
    ]


def days_of(*, since: datetime, until: datetime) -> list[date]:
    """Every UTC day from ``since`` up to ``until`` (its day included unless ``until`` is
    that day's midnight): the x axis of a report, days without use included."""
    first, last = since.astimezone(UTC).date(), (until - timedelta(microseconds=1)).date()
    return [first + timedelta(days=n) for n in range((last - first).days + 1)]


def series_by(rows: list[DayUsage], *, by: str) -> dict[str, dict[date, Decimal]]:
    """GPU-hours per day for each value of ``by`` (``tenant``, ``user`` or ``flavor``)."""
    out: dict[str, dict[date, Decimal]] = defaultdict(lambda: defaultdict(Decimal))
    for row in rows:
        out[getattr(row, by)][row.day] += row.gpu_hours
    return {name: dict(days) for name, days in out.items()}


def activity_series(rows: list[DayUsage]) -> dict[str, dict[date, Decimal]]:
    """GPU-hours per day split into ``active`` and ``idle``."""
    active: dict[date, Decimal] = defaultdict(Decimal)
    idle: dict[date, Decimal] = defaultdict(Decimal)
    for row in rows:
        active[row.day] += row.active_hours
        idle[row.day] += row.idle_hours
    return {"active": dict(active), "idle": dict(idle)}


def totals_by(rows: list[DayUsage], *, by: str) -> list[dict[str, Any]]:
    """GPU-hours, active and idle, over all the days for each value of ``by``, the
    largest first."""
    sums: dict[str, list[Decimal]] = defaultdict(lambda: [Decimal(0), Decimal(0)])
    for row in rows:
        sums[getattr(row, by)][0] += row.gpu_hours
        sums[getattr(row, by)][1] += row.idle_hours
    return [
        {
            "name": name,
            "gpu_hours": round(used, 3),
            "active_hours": round(used - idle, 3),
            "idle_hours": round(idle, 3),
        }
        for name, (used, idle) in sorted(sums.items(), key=lambda item: (-item[1][0], item[0]))
    ]


# --- Budgets --------------------------------------------------------------------------


def month_start(now: datetime) -> datetime:
    """UTC midnight of the first day of ``now``'s calendar month."""
    return datetime.combine(now.astimezone(UTC).date().replace(day=1), time.min, tzinfo=UTC)


def month_gpu_hours(*, tenant: Tenant, now: datetime | None = None) -> Decimal:
    """GPU-hours the tenant has used in the current UTC calendar month (open spans to
    now), in one query."""
    now = now or timezone.now()
    since = month_start(now)
    spans = UsageSpan.objects.for_tenant(tenant).filter(
        Q(ended_at__isnull=True) | Q(ended_at__gt=since), started_at__lt=now
    )
    total = Decimal(0)
    for gpus, started_at, ended_at in spans.values_list("gpus", "started_at", "ended_at"):
        seconds = (min(ended_at or now, now) - max(started_at, since)).total_seconds()
        total += gpus * Decimal(max(seconds, 0)) / _HOUR
    return total


@dataclass(frozen=True)
class BudgetStatus:
    """Where a tenant stands against its monthly GPU-hour budget."""

    tenant: Tenant
    budget: int
    used: Decimal
    month: datetime  # the first instant of the month it is about
    policy: str  # settings.BUDGET_POLICY

    @property
    def fraction(self) -> Decimal:
        return self.used / self.budget if self.budget else Decimal(1)

    @property
    def percent(self) -> int:
        """Whole percent used, rounded down, so that a banner never says 80% at 79.9%."""
        return int(self.fraction * 100)

    @property
    def warns(self) -> bool:
        return self.fraction >= BUDGET_WARN_FRACTION

    @property
    def over(self) -> bool:
        return self.used >= self.budget

    @property
    def deprioritises(self) -> bool:
        """New dev requests queue at the lowest priority (the "deprioritise" policy)."""
        return self.over and self.policy == "deprioritise"


def budget_status(*, tenant: Tenant, now: datetime | None = None) -> BudgetStatus | None:
    """The tenant's use of its monthly GPU-hour budget this UTC month; ``None`` (and no
    query) when it has no budget."""
    if tenant.monthly_gpu_hour_budget is None:
        return None
    now = now or timezone.now()
    return BudgetStatus(
        tenant=tenant,
        budget=tenant.monthly_gpu_hour_budget,
        used=month_gpu_hours(tenant=tenant, now=now),
        month=month_start(now),
        policy=settings.BUDGET_POLICY,
    )


def budget_deprioritises(*, tenant: Tenant, kind: str) -> bool:
    """Whether a new request of ``kind`` queues at ``CLUSTER_PRIORITY_MIN`` because the
    tenant is at or over its budget under the "deprioritise" policy (dev requests
    only: production work is the tenant admins' call). No query unless the policy is
    "deprioritise" and the tenant has a budget."""
    if kind != ClusterKind.DEV or settings.BUDGET_POLICY != "deprioritise":
        return False
    status = budget_status(tenant=tenant)
    return status is not None and status.deprioritises
