"""A tenant's monthly cost report (docs/cost.md): what it spent in one UTC calendar
month per engineer, per request and per flavor, with its caps; as data for the HTML page
and the mail, and as CSV."""

from __future__ import annotations

import csv
import io
from datetime import UTC, date, datetime, timedelta
from typing import Any

from django.utils import timezone

from clusters.rows.cost_caps import cap_statuses
from clusters.rows.costs import cost_rows, currency, month_bounds, total_cost, totals
from tenants.models import Tenant

CSV_COLUMNS = ("section", "name", "workload", "user", "flavor", "gpu_hours", "cost", "currency")


def parse_month(value: Any, *, now: datetime | None = None) -> date:
    """The first day of a ``YYYY-MM`` month; else (absent) the current UTC month.
    Raises ``ValueError`` for a malformed value."""
    if not value:
        return (now or timezone.now()).date().replace(day=1)
    year, month = str(value).split("-")
    return date(int(year), int(month), 1)


def last_month(now: datetime) -> date:
    """The first day of the UTC month before ``now``'s."""
    return (now.astimezone(UTC).date().replace(day=1) - timedelta(days=1)).replace(day=1)


def monthly_report(*, tenant: Tenant, month: date, now: datetime | None = None) -> dict[str, Any]:
    """What the tenant spent in ``month`` (open spans run to now in the current one)."""
    now = now or timezone.now()
    since, until = month_bounds(month)
    rows = cost_rows(tenant=tenant, since=since, until=until, now=now)
    caps = cap_statuses(tenant=tenant, now=now) if since <= now < until else []
    return {
        "tenant": tenant.slug,
        "tenant_name": tenant.name,
        "month": month,
        "since": since,
        "until": until,
        "currency": currency(),
        "total_cost": total_cost(rows),
        "total_gpu_hours": round(sum((r.gpu_hours for r in rows), start=0), 3),
        "unpriced_gpu_hours": round(sum((r.unpriced_hours for r in rows), start=0), 3),
        "by_user": totals(rows, by="user"),
        "by_request": totals(rows, by="request"),
        "by_flavor": totals(rows, by="flavor"),
        "by_day": totals(rows, by="day"),
        "caps": caps,
    }


def report_csv(report: dict[str, Any]) -> str:
    """The report as CSV: one line per engineer, request and flavor, then the total."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(CSV_COLUMNS)
    cur = report["currency"]
    for row in report["by_user"]:
        writer.writerow(
            ["user", row["user"], "", row["user"], "", row["gpu_hours"], row["cost"], cur]
        )
    for row in report["by_request"]:
        writer.writerow(
            [
                "request",
                row["request"],
                row["workload"],
                row["user"],
                row["flavor"],
                row["gpu_hours"],
                row["cost"],
                cur,
            ]
        )
    for row in report["by_flavor"]:
        writer.writerow(
            ["flavor", row["flavor"], "", "", row["flavor"], row["gpu_hours"], row["cost"], cur]
        )
    writer.writerow(
        [
            "total",
            report["tenant"],
            "",
            "",
            "",
            report["total_gpu_hours"],
            report["total_cost"],
            cur,
        ]
    )
    return out.getvalue()
