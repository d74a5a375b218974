"""Money caps (:class:`~clusters.models.CostCap`): where a tenant and its engineers
stand against their monthly budgets in money, and the hard cap that refuses new
requests. The soft cap's notices are sent by ``notifications.cost_notices``."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from django.db.models import Q
from django.utils import timezone

from clusters.models import CostCap
from clusters.rows.costs import currency, month_spend
from clusters.rows.usage import month_start
from controlplane.exceptions import ServiceConflict
from tenants.models import Tenant


@dataclass(frozen=True)
class CapStatus:
    """One cap against this month's spend of what it caps."""

    cap: CostCap
    spent: Decimal
    month: date

    @property
    def who(self) -> str:
        return self.cap.username or self.cap.tenant.slug

    @property
    def soft_crossed(self) -> bool:
        return self.cap.soft_limit is not None and self.spent >= self.cap.soft_limit

    @property
    def hard_crossed(self) -> bool:
        return self.cap.hard_limit is not None and self.spent >= self.cap.hard_limit

    def describe(self, *, limit: str) -> str:
        """What the cap says, e.g. "acme has spent 120.50 USD of its hard monthly cost
        cap of 100.00 USD in November 2026 (UTC)"."""
        amount = self.cap.hard_limit if limit == "hard" else self.cap.soft_limit
        whose = (
            f"engineer {self.cap.username} in {self.cap.tenant.slug} has"
            if self.cap.username
            else f"tenant {self.cap.tenant.slug} has"
        )
        return (
            f"{whose} spent {self.spent:,.2f} {currency()} of the {limit} monthly cost cap "
            f"of {amount:,.2f} {currency()} in {self.month:%B %Y} (UTC)"
        )


def _month(now: datetime) -> date:
    return month_start(now).date()


def cap_statuses(
    *, tenant: Tenant, username: str | None = None, now: datetime | None = None
) -> list[CapStatus]:
    """The tenant's caps (with ``username``: only the tenant's own and that engineer's)
    with this month's spend of each; no spend is read for a tenant without caps."""
    now = now or timezone.now()
    caps = CostCap.objects.for_tenant(tenant).select_related("tenant")
    if username is not None:
        caps = caps.filter(Q(username="") | Q(username=username))
    out = []
    for cap in caps:
        spent = month_spend(tenant=tenant, username=cap.username or None, now=now)
        out.append(CapStatus(cap=cap, spent=spent, month=_month(now)))
    return out


def check_hard_caps(
    *, tenant: Tenant, owner: Any, now: datetime | None = None, any_cap: bool | None = None
) -> None:
    """Refuse a new request of ``owner`` in ``tenant`` (``ServiceConflict`` with code
    ``cost_cap``, an HTTP 409) when the tenant or that engineer has reached a hard
    monthly cost cap; the message names the cap, the spend and the month. ``any_cap``:
    whether a hard cap applies at all, when the caller read it already."""
    username = owner.get_username()
    if any_cap is False:
        return
    if any_cap is None and (
        not CostCap.objects.for_tenant(tenant)
        .filter(Q(username="") | Q(username=username), hard_limit__isnull=False)
        .exists()
    ):
        return
    for status in cap_statuses(tenant=tenant, username=username, now=now):
        if status.hard_crossed:
            raise ServiceConflict(
                f"Refused: {status.describe(limit='hard')}. New requests are refused "
                "until the month turns or a tenant admin raises the cap.",
                code="cost_cap",
            )
