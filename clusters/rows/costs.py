"""Showback: what GPU time cost, from the usage ledger and the flavor prices.

Each :class:`~clusters.models.UsageSpan` inside a period is cut at UTC midnights and at
the moments its flavor's price changed (:class:`~clusters.models.FlavorPrice`), and each
piece is priced at the price in force over it: ``gpus x hours x price``. Where the price
has a borrowed price too, the GPU-hours a tenant held beyond its nominal quota on the
flavor are priced at that: over each stretch of time, the share of what the tenant held
above its quota is borrowed, and each of its requests pays that share of its GPU-hours at
the borrowed price (its quota as it is now; docs/cost.md). A flavor without a price in
force costs nothing and its hours are told apart (``unpriced_hours``).
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
from tenants.models import Quota, Tenant

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
        self._by_flavor: dict[str, list[tuple[datetime, Decimal, Decimal | None]]] = defaultdict(
            list
        )
        for row in rows if prices is None else prices:
            self._by_flavor[row.flavor_name].append(
                (row.effective_from, row.price_per_gpu_hour, row.borrowed_price_per_gpu_hour)
            )

    def _in_force(self, flavor: str, moment: datetime) -> tuple[Any, ...] | None:
        line = self._by_flavor.get(flavor, [])
        i = bisect_right([entry[0] for entry in line], moment)
        return line[i - 1] if i else None

    def price_at(self, flavor: str, moment: datetime) -> Decimal | None:
        """The price per GPU-hour in force at ``moment``, or ``None`` before the first."""
        found = self._in_force(flavor, moment)
        return None if found is None else Decimal(found[1])

    def borrowed_price_at(self, flavor: str, moment: datetime) -> Decimal | None:
        """The price of a borrowed GPU-hour at ``moment``: the borrowed price where the
        price in force has one, else the price itself (``None`` before the first)."""
        found = self._in_force(flavor, moment)
        if found is None:
            return None
        return Decimal(found[1] if found[2] is None else found[2])

    def any_borrowing(self) -> bool:
        """Whether any flavor's price has a borrowed price of its own."""
        return any(self.prices_borrowing(flavor) for flavor in self._by_flavor)

    def prices_borrowing(self, flavor: str) -> bool:
        """Whether any of the flavor's prices has a borrowed price of its own."""
        return any(entry[2] is not None for entry in self._by_flavor.get(flavor, []))

    def changes(self, flavor: str, start: datetime, stop: datetime) -> list[datetime]:
        """The moments strictly inside ``(start, stop)`` at which the price changes."""
        return [entry[0] for entry in self._by_flavor.get(flavor, []) if start < entry[0] < stop]


class Holdings:
    """What one tenant held on one flavor over time, from its spans: the borrowed share
    of any moment (what it held beyond its nominal quota, over what it held)."""

    def __init__(self, spans: list[tuple[datetime, datetime, Decimal]], nominal: Decimal) -> None:
        deltas: dict[datetime, Decimal] = defaultdict(Decimal)
        for start, stop, gpus in spans:
            deltas[start] += gpus
            deltas[stop] -= gpus
        self.moments = sorted(deltas)
        self.held: list[Decimal] = []
        total = Decimal(0)
        for moment in self.moments:
            total += deltas[moment]
            self.held.append(total)
        self.nominal = nominal

    def cuts(self, start: datetime, stop: datetime) -> list[datetime]:
        """The moments strictly inside ``(start, stop)`` at which what it held changed."""
        return [m for m in self.moments if start < m < stop]

    def borrowed_share(self, moment: datetime) -> Decimal:
        """The share of what it held from ``moment`` on (until the next change) that was
        beyond its nominal quota."""
        i = bisect_right(self.moments, moment)
        held = self.held[i - 1] if i else Decimal(0)
        if held <= 0:
            return Decimal(0)
        return max(held - self.nominal, Decimal(0)) / held


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
    engineers, from ``since`` to ``until`` (open spans run to then or now). Two queries;
    a third (the quotas) when a flavor has a borrowed price."""
    end = min(until, now or timezone.now())
    book = book or PriceBook()
    spans = UsageSpan.objects.unscoped() if tenant is None else UsageSpan.objects.for_tenant(tenant)
    spans = spans.filter(Q(ended_at__isnull=True) | Q(ended_at__gt=since), started_at__lt=end)
    if username is not None and not book.any_borrowing():
        spans = spans.filter(username=username)
    found = [
        (
            slug,
            user,
            flavor,
            name,
            workload,
            gpus,
            max(started_at, since),
            min(ended_at or end, end),
        )
        for slug, user, flavor, name, workload, gpus, started_at, ended_at in spans.values_list(
            "tenant__slug",
            "username",
            "flavor_name",
            "cluster__name",
            "cluster__workload",
            "gpus",
            "started_at",
            "ended_at",
        )
    ]
    holdings = _holdings(found, book)
    sums: dict[tuple[Any, ...], list[Decimal]] = defaultdict(lambda: [Decimal(0)] * 3)
    for slug, user, flavor, name, workload, gpus, a, b in found:
        # With borrowed prices an engineer's cost needs the others' spans too: together
        # they make what the tenant borrowed.
        if username is not None and user != username:
            continue
        held = holdings.get((slug, flavor))
        cuts = book.changes(flavor, a, b) + (held.cuts(a, b) if held else [])
        for p, q in _pieces(a, b, sorted(set(cuts))):
            hours = gpus * Decimal((q - p).total_seconds()) / _HOUR
            price = book.price_at(flavor, p)
            acc = sums[p.date(), slug, user, flavor, name, workload]
            acc[0] += hours
            if price is None:
                acc[2] += hours
                continue
            share = held.borrowed_share(p) if held else Decimal(0)
            borrowed = book.borrowed_price_at(flavor, p) or price
            acc[1] += hours * ((1 - share) * price + share * borrowed)
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


def _holdings(found: list[tuple[Any, ...]], book: PriceBook) -> dict[tuple[str, str], Holdings]:
    """What each tenant held on each flavor that has a borrowed price, over the spans
    ``found``, against its nominal quota now (one query, none without such a price)."""
    flavors = {row[2] for row in found if book.prices_borrowing(row[2])}
    if not flavors:
        return {}
    tenants = {row[0] for row in found if row[2] in flavors}
    nominal = {
        (slug, name): Decimal(gpus)
        for slug, name, gpus in Quota.objects.filter(
            tenant__slug__in=tenants, flavor__name__in=flavors
        ).values_list("tenant__slug", "flavor__name", "gpus")
    }
    by_pool: dict[tuple[str, str], list[tuple[datetime, datetime, Decimal]]] = defaultdict(list)
    for slug, _, flavor, _, _, gpus, a, b in found:
        if flavor in flavors and a < b:
            by_pool[slug, flavor].append((a, b, gpus))
    return {pool: Holdings(spans, nominal.get(pool, Decimal(0))) for pool, spans in by_pool.items()}


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
