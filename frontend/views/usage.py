"""Usage pages: a tenant's GPU-hours over time (``/t/<slug>/usage/``) and every
tenant's (``/usage/``, platform admins), as charts and as CSV (``?format=csv``).

Both read :func:`clusters.rows.usage.daily_usage` over a window of 7, 30 or 90 UTC days
ending today; the CSV carries the very rows the charts are drawn from, each with its
cost (:mod:`clusters.rows.costs`), or with ``by=request`` a line per request and day.
"""

from __future__ import annotations

import csv
from datetime import date, datetime
from decimal import Decimal

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from clusters import selectors
from clusters.rows import costs, usage
from frontend.charts import Chart, stacked_days
from frontend.views.common import tenant_page
from tenants.selectors import is_platform_admin

CSV_COLUMNS = (
    "day",
    "tenant",
    "user",
    "flavor",
    "gpu_hours",
    "active_hours",
    "idle_hours",
    "cost",
    "currency",
)
# ``?format=csv&by=request``: a line per request and day (docs/cost.md).
REQUEST_CSV_COLUMNS = (
    "day",
    "tenant",
    "request",
    "workload",
    "user",
    "flavor",
    "gpu_hours",
    "cost",
    "currency",
)


def _window(request: HttpRequest) -> tuple[int, datetime, datetime]:
    days = usage.parse_window(request.GET.get("days"))
    now = timezone.now()
    return days, usage.window_start(days=days, now=now), now


def _csv(
    rows: list[usage.DayUsage],
    cost_rows: list[costs.CostRow],
    *,
    request: HttpRequest,
    scope: str,
    days: int,
    today: date,
) -> HttpResponse:
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    per_request = request.GET.get("by") == "request"
    what = "requests" if per_request else "usage"
    filename = f"gangway-{what}-{scope}-{days}d-{today:%Y-%m-%d}.csv"
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    writer = csv.writer(response)
    currency = costs.currency()
    if per_request:
        writer.writerow(REQUEST_CSV_COLUMNS)
        for line in cost_rows:
            writer.writerow(
                [
                    line.day.isoformat(),
                    line.tenant,
                    line.request,
                    line.workload,
                    line.user,
                    line.flavor,
                    f"{line.gpu_hours:.3f}",
                    costs.money(line.cost),
                    currency,
                ]
            )
        return response
    bucket_cost = costs.cost_by_bucket(cost_rows)
    writer.writerow(CSV_COLUMNS)
    for row in rows:
        writer.writerow(
            [
                row.day.isoformat(),
                row.tenant,
                row.user,
                row.flavor,
                f"{row.gpu_hours:.3f}",
                f"{row.active_hours:.3f}",
                f"{row.idle_hours:.3f}",
                costs.money(
                    bucket_cost.get((row.day, row.tenant, row.user, row.flavor), Decimal(0))
                ),
                currency,
            ]
        )
    return response


def _charts(rows: list[usage.DayUsage], *, days: list[date], by: tuple[str, ...]) -> list[Chart]:
    """A chart per dimension in ``by`` (tenant, user, flavor), then active against idle."""
    charts = [
        stacked_days(
            title=f"GPU-hours per day by {key}", days=days, series=usage.series_by(rows, by=key)
        )
        for key in by
    ]
    charts.append(
        stacked_days(
            title="Active and idle GPU-hours per day",
            days=days,
            series=usage.activity_series(rows),
            css={"active": "chart-active", "idle": "chart-idle"},
        )
    )
    return charts


@login_required
def usage_page(request: HttpRequest, slug: str) -> HttpResponse:
    """A tenant's GPU-hours per day by user and by flavor, active against idle, over
    the last 7, 30 or 90 days, with the totals per user and flavor (chargeback)."""
    page = tenant_page(request, slug)
    days, since, now = _window(request)
    hours = usage.period_hours(tenant=page.tenant, since=since, until=now, now=now)
    rows = usage.day_rows(*hours)
    cost_rows = costs.cost_rows(tenant=page.tenant, since=since, until=now, now=now)
    if request.GET.get("format") == "csv":
        return _csv(
            rows, cost_rows, request=request, scope=page.tenant.slug, days=days, today=now.date()
        )
    summary = selectors.usage_summary(tenant=page.tenant, since=since, until=now, hours=hours)
    summary = costs.with_costs(summary, cost_rows)
    peak = max((row["gpu_hours"] for row in summary["by_user"]), default=0) or 1
    for row in summary["by_user"]:
        row["percent"] = round(100 * row["gpu_hours"] / peak)
    axis = usage.days_of(since=since, until=now)
    charts = _charts(rows, days=axis, by=("user", "flavor"))
    return render(
        request,
        "frontend/usage.html",
        page.context(summary=summary, days=days, periods=usage.USAGE_WINDOWS, charts=charts),
    )


@login_required
def platform_usage_page(request: HttpRequest) -> HttpResponse:
    """Every tenant's GPU-hours per day by tenant and by flavor, active against idle
    (platform admins; anybody else gets a 404, like any page they may not see)."""
    if not is_platform_admin(request.user):
        raise Http404("No such page.")
    days, since, now = _window(request)
    rows = usage.daily_usage(tenant=None, since=since, until=now, now=now)
    cost_rows = costs.cost_rows(tenant=None, since=since, until=now, now=now)
    if request.GET.get("format") == "csv":
        return _csv(rows, cost_rows, request=request, scope="all", days=days, today=now.date())
    cost_of_tenant = {r["tenant"]: r["cost"] for r in costs.totals(cost_rows, by="tenant")}
    cost_of_flavor = {r["flavor"]: r["cost"] for r in costs.totals(cost_rows, by="flavor")}
    axis = usage.days_of(since=since, until=now)
    context = {
        "days": days,
        "periods": usage.USAGE_WINDOWS,
        "since": since,
        "charts": _charts(rows, days=axis, by=("tenant", "flavor")),
        "by_tenant": [
            {**line, "cost": cost_of_tenant.get(line["name"], Decimal("0.00"))}
            for line in usage.totals_by(rows, by="tenant")
        ],
        "by_flavor": [
            {**line, "cost": cost_of_flavor.get(line["name"], Decimal("0.00"))}
            for line in usage.totals_by(rows, by="flavor")
        ],
        "total": round(sum((row.gpu_hours for row in rows), start=Decimal(0)), 3),
        "total_cost": costs.total_cost(cost_rows),
        "currency": costs.currency(),
    }
    return render(request, "frontend/platform_usage.html", context)
