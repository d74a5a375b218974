"""Showback: what GPU time cost, from the usage ledger and the flavor prices.

Each :class:`~clusters.models.UsageSpan` inside a period is cut at UTC midnights and at
the moments its flavor's price changed (:class:`~clusters.models.FlavorPrice`), and each
piece is priced at the price in force over it: ``gpus x hours x price``. The ledger does
not record whether GPUs were the tenant's own or borrowed, so every GPU-hour is priced
at the guaranteed price (docs/cost.md). A flavor without a price in force costs nothing
and its hours are told apart (``unpriced_hours``).
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from clusters.models import FlavorPrice, UsageSpan
from clusters.rows.usage import month_start
from tenants.models import Tenant

_HOUR = Decimal(3600)
CENT = Decimal("0.01")


def currency() -> str:
    """The currency every amount is in (``COST_CURRENCY``)."""
    return str(settings.COST_CURRENCY)


def money(value: Decimal) -> Decimal:
    """An amount rounded to cents, as it is shown and compared against limits."""
    return value.quantize(CENT)


class PriceBook:
    """Every flavor's prices over time, read once: :meth:`price_at` and the moments
    its price changed (:meth:`changes`)."""

    def __init__(self, prices: Iterable[FlavorPrice] | None = None) -> None:
        rows = FlavorPrice.objects.order_by("flavor_name", "effective_from")
        self._by_flavor: dict[str, list[tuple[datetime, Decimal]]] = defaultdict(list)
        for row in rows if prices is None else prices:
            self._by_flavor[row.flavor_name].append((row.effective_from, row.price_per_gpu_hour))

    def price_at(self, flavor: str, moment: datetime) -> Decimal | None:
        """The price per GPU-hour in force at ``moment``, or ``None`` before the first."""
        line = self._by_flavor.get(flavor, [])
        i = bisect_right([at for at, _ in line], moment)
        return line[i - 1][1] if i else None

    def changes(self, flavor: str, start: datetime, stop: datetime) -> list[datetime]:
        """The moments strictly inside ``(start, stop)`` at which the price changes."""
        return [at for at, _ in self._by_flavor.get(flavor, []) if start < at < stop]


@dataclass(frozen=True)
class CostRow:
    """GPU-hours and their cost of one request on one UTC day."""

    day: date
    tenant: str
    user: str
    flavor: str
    request: str
    workload: str  # cluster, job or service
    gpu_hours: Decimal
    cost: Decimal
    unpriced_hours: Decimal


def _pieces(
    start: datetime, stop: datetime, cuts: list[datetime]
) -> Iterable[tuple[datetime, datetime]]:
    """``[start, stop)`` cut at UTC midnights and at ``cuts``."""
    start, stop = start.astimezone(UTC), stop.astimezone(UTC)
    while start < stop:
        midnight = datetime.combine(start.date() + timedelta(days=1), time.min, tzinfo=UTC)
        end = min([midnight, stop, *(c for c in cuts if c > start)])
        yield start, end
        start = end


def cost_rows(
    *,
    tenant: Tenant | None,
    since: datetime,
    until: datetime,
    username: str | None = None,
    now: datetime | None = None,
    book: PriceBook | None = None,
) -> list[CostRow]:
    """Cost per UTC day and request of a tenant (``None``: every one), or of one of its
    engineers, from ``since`` to ``until`` (open spans run to then or now). Two queries."""
    end = min(until, now or timezone.now())
    book = book or PriceBook()
    spans = UsageSpan.objects.unscoped() if tenant is None else UsageSpan.objects.for_tenant(tenant)
    spans = spans.filter(Q(ended_at__isnull=True) | Q(ended_at__gt=since), started_at__lt=end)
    if username is not None:
        spans = spans.filter(username=username)
    sums: dict[tuple[Any, ...], list[Decimal]] = defaultdict(lambda: [Decimal(0)] * 3)
    for slug, user, flavor, name, workload, gpus, started_at, ended_at in spans.values_list(
        "tenant__slug",
        "username",
        "flavor_name",
        "cluster__name",
        "cluster__workload",
        "gpus",
        "started_at",
        "ended_at",
    ):
        a, b = max(started_at, since), min(ended_at or end, end)
        for p, q in _pieces(a, b, book.changes(flavor, a, b)):
            hours = gpus * Decimal((q - p).total_seconds()) / _HOUR
            price = book.price_at(flavor, p)
            acc = sums[p.date(), slug, user, flavor, name, workload]
            acc[0] += hours
            if price is None:
                acc[2] += hours
            else:
                acc[1] += hours * price
    return [
        CostRow(
            day=key[0],
            tenant=key[1],
            user=key[2],
            flavor=key[3],
            request=key[4],
            workload=key[5],
            gpu_hours=h,
            cost=c,
            unpriced_hours=u,
        )
        for key, (h, c, u) in sorted(sums.items())
        if h > 0
    ]


def totals(rows: Iterable[CostRow], *, by: str) -> list[dict[str, Any]]:
    """GPU-hours and cost over ``rows`` for each value of ``by`` (an attribute of
    :class:`CostRow`, or ``request`` with its workload and user), the costliest first."""
    sums: dict[Any, list[Decimal]] = defaultdict(lambda: [Decimal(0), Decimal(0)])
    for row in rows:
        key = (
            (row.request, row.workload, row.user, row.flavor)
            if by == "request"
            else getattr(row, by)
        )
        sums[key][0] += row.gpu_hours
        sums[key][1] += row.cost
    out = []
    for key, (hours, cost) in sorted(sums.items(), key=lambda kv: (-kv[1][1], -kv[1][0], kv[0])):
        line: dict[str, Any] = (
            {"request": key[0], "workload": key[1], "user": key[2], "flavor": key[3]}
            if by == "request"
            else {by: key}
        )
        out.append({**line, "gpu_hours": round(hours, 3), "cost": money(cost)})
    return out


def total_cost(rows: Iterable[CostRow]) -> Decimal:
    """The cost of ``rows``, to the cent."""
    return money(sum((row.cost for row in rows), Decimal(0)))


def month_spend(
    *, tenant: Tenant, username: str | None = None, now: datetime | None = None
) -> Decimal:
    """What the tenant (or one engineer of it) has spent this UTC calendar month."""
    now = now or timezone.now()
    return total_cost(
        cost_rows(tenant=tenant, username=username, since=month_start(now), until=now, now=now)
    )


def month_bounds(month: date) -> tuple[datetime, datetime]:
    """The first instant of ``month`` (any day in it) and of the next, in UTC."""
    first = month.replace(day=1)
    following = (first + timedelta(days=32)).replace(day=1)
    return (
        datetime.combine(first, time.min, tzinfo=UTC),
        datetime.combine(following, time.min, tzinfo=UTC),
    )


def cost_by_bucket(rows: Iterable[CostRow]) -> dict[tuple[date, str, str, str], Decimal]:
    """Cost per (day, tenant, user, flavor): the buckets of the usage reports."""
    out: dict[tuple[date, str, str, str], Decimal] = defaultdict(Decimal)
    for row in rows:
        out[row.day, row.tenant, row.user, row.flavor] += row.cost
    return out


def with_costs(summary: dict[str, Any], rows: list[CostRow]) -> dict[str, Any]:
    """A usage summary (``clusters.selectors.usage_summary``) with its costs: the total,
    each user's, flavor's and pair's, and the requests' (``by_request``, each with its
    cost per day), in :func:`currency`."""
    by_user = {r["user"]: r["cost"] for r in totals(rows, by="user")}
    by_flavor = {r["flavor"]: r["cost"] for r in totals(rows, by="flavor")}
    pairs: dict[tuple[str, str], Decimal] = defaultdict(Decimal)
    days: dict[tuple[str, str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        pairs[row.user, row.flavor] += row.cost
        days[row.request, row.workload, row.user, row.flavor].append(
            {
                "day": row.day.isoformat(),
                "gpu_hours": round(row.gpu_hours, 3),
                "cost": money(row.cost),
            }
        )
    zero = money(Decimal(0))
    for line in summary["by_user"]:
        line["cost"] = by_user.get(line["user"], zero)
    for line in summary["by_flavor"]:
        line["cost"] = by_flavor.get(line["flavor"], zero)
    for line in summary["by_user_and_flavor"]:
        line["cost"] = money(pairs.get((line["user"], line["flavor"]), Decimal(0)))
    by_request = totals(rows, by="request")
    for line in by_request:
        line["daily"] = days[line["request"], line["workload"], line["user"], line["flavor"]]
    return {
        **summary,
        "currency": currency(),
        "total_cost": total_cost(rows),
        "by_request": by_request,
    }
