"""GPU-hours over time and monthly budgets: the usage ledger read by day.

The ledger is :class:`~clusters.models.UsageSpan` (GPUs held) and
:class:`~clusters.models.IdleSpan` (held while Ray showed no use), cut at UTC midnights
into per-day buckets (an open span runs to now). On PostgreSQL the database cuts and
sums in one query per ledger (:func:`_hours_sql`), so a report costs the web process the
same however long the history; elsewhere Python buckets the spans
(:func:`_hours_python`, the reference the SQL is tested against). The budget reads are
shared by the dashboard's banner, the create service and the dry-run.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import connections
from django.db.models import DateTimeField, F, Q, QuerySet, Value
from django.db.models.functions import Coalesce, Greatest, Least
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


# A bucket of GPU-hours: (UTC day, tenant slug, user, flavor).
Bucket = tuple[date, str, str, str]


def hours_by_day(spans: QuerySet[Any], since: datetime, end: datetime) -> dict[Bucket, Decimal]:
    """GPU-hours of ``spans`` (usage or idle spans) inside ``[since, end)``, cut at UTC
    midnights, by (day, tenant, user, flavor); an open span runs to ``end``. One query."""
    spans = spans.filter(Q(ended_at__isnull=True) | Q(ended_at__gt=since), started_at__lt=end)
    if connections[spans.db].vendor == "postgresql":
        return _hours_sql(spans, since, end)
    return _hours_python(spans, since, end)


def _hours_python(spans: QuerySet[Any], since: datetime, end: datetime) -> dict[Bucket, Decimal]:
    """:func:`hours_by_day` by reading every span (the reference for :func:`_hours_sql`)."""
    buckets: dict[Bucket, Decimal] = defaultdict(Decimal)
    rows = spans.values_list(
        "tenant__slug", "username", "flavor_name", "gpus", "started_at", "ended_at"
    )
    for tenant, user, flavor, gpus, started_at, ended_at in rows:
        for day, seconds in _day_pieces(max(started_at, since), min(ended_at or end, end)):
            buckets[day, tenant, user, flavor] += gpus * seconds / _HOUR
    return buckets


def _hours_sql(spans: QuerySet[Any], since: datetime, end: datetime) -> dict[Bucket, Decimal]:
    """:func:`hours_by_day` computed by PostgreSQL: each span clipped to the period, cut
    into UTC days by ``generate_series`` and summed per bucket, in exact numerics."""
    moment: DateTimeField[Any, Any] = DateTimeField()
    clipped = spans.values(
        t=F("tenant__slug"),
        u=F("username"),
        f=F("flavor_name"),
        g=F("gpus"),
        a=Greatest("started_at", Value(since, output_field=moment)),
        b=Least(
            Coalesce("ended_at", Value(end, output_field=moment)), Value(end, output_field=moment)
        ),
    )
    inner, params = clipped.query.get_compiler(using=clipped.db).as_sql()
    # Days are 24 hours in UTC: an interval of '1 day' would follow the session's zone.
    query = (
        "SELECT (day AT TIME ZONE 'UTC')::date, s.t, s.u, s.f, sum(s.g * extract(epoch FROM "
        "least(s.b, day + interval '24 hours') - greatest(s.a, day))) "
        f"FROM ({inner}) AS s CROSS JOIN LATERAL generate_series("
        "date_trunc('day', s.a, 'UTC'), s.b, interval '24 hours') AS day "
        "WHERE least(s.b, day + interval '24 hours') > greatest(s.a, day) "
        "GROUP BY 1, 2, 3, 4"
    )
    with connections[clipped.db].cursor() as cursor:
        cursor.execute(query, params)
        return {
            (day, tenant, user, flavor): Decimal(gpu_seconds) / _HOUR
            for day, tenant, user, flavor, gpu_seconds in cursor.fetchall()
        }


def period_hours(
    *, tenant: Tenant | None, since: datetime, until: datetime, now: datetime | None = None
) -> tuple[dict[Bucket, Decimal], dict[Bucket, Decimal]]:
    """Usage and idle buckets of a tenant (``None``: every one) from ``since`` to
    ``until`` (open spans to then or now): two queries for summary and day rows."""
    end = min(until, now or timezone.now())
    usage = UsageSpan.objects.unscoped() if tenant is None else UsageSpan.objects.for_tenant(tenant)
    idle = IdleSpan.objects.unscoped() if tenant is None else IdleSpan.objects.for_tenant(tenant)
    return hours_by_day(usage, since, end), hours_by_day(idle, since, end)


def daily_usage(
    *, tenant: Tenant | None, since: datetime, until: datetime, now: datetime | None = None
) -> list[DayUsage]:
    """GPU-hours per day, tenant, user and flavor, active and idle (:func:`day_rows`)."""
    return day_rows(*period_hours(tenant=tenant, since=since, until=until, now=now))


def day_rows(used: dict[Bucket, Decimal], idled: dict[Bucket, Decimal]) -> list[DayUsage]:
    """:class:`DayUsage` rows of the buckets of :func:`hours_by_day` (usage and idle),
    sorted by day, tenant, user and flavor; buckets without GPU-hours are left out."""
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
    buckets = hours_by_day(UsageSpan.objects.for_tenant(tenant), month_start(now), now)
    return sum(buckets.values(), Decimal(0))


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
