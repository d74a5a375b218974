"""Showback pages (docs/cost.md): the flavor prices (``/platform/prices/``, platform
admins) and a tenant's monthly cost report (``/t/<slug>/usage/report/``, any member;
``?month=YYYY-MM``, ``?format=csv``) with its money caps, which its admins set there."""

from __future__ import annotations

from datetime import timedelta

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone

from clusters.models import CostCap, FlavorPrice
from clusters.requests import cost_settings
from clusters.rows import cost_report, costs
from frontend.cost_forms import CostCapForm, PriceForm
from frontend.views.common import form_page, tenant_page
from frontend.views.platform import require_platform_admin, submitted
from tenants.models import Role
from tenants.selectors import is_platform_admin


@login_required
def prices(request: HttpRequest) -> HttpResponse:
    """Every flavor's prices over time, the one in force marked; set a price."""
    require_platform_admin(request)
    form = PriceForm(request.POST or None)
    saved = submitted(
        request,
        form,
        lambda data: cost_settings.flavor_price_set(actor=request.user, **data),
        lambda data: (
            f"Priced {data['flavor']} at {data['price_per_gpu_hour']} "
            f"{costs.currency()} per GPU-hour."
        ),
    )
    if saved is not None:
        return redirect("platform-prices")
    now = timezone.now()
    rows = list(FlavorPrice.objects.order_by("flavor_name", "-effective_from"))
    seen: set[str] = set()
    for row in rows:  # newest first: the first one already begun is in force
        begun = row.effective_from <= now
        row.in_force = begun and row.flavor_name not in seen  # type: ignore[attr-defined]
        if begun:
            seen.add(row.flavor_name)
    context = {"form": form, "prices": rows, "currency": costs.currency(), "now": now}
    return form_page(request, "frontend/platform/prices.html", context)


@login_required
def cost_report_page(request: HttpRequest, slug: str) -> HttpResponse:
    """A tenant's cost report of one UTC month (HTML or CSV) and, for its admins, the
    form that sets its money caps."""
    page = tenant_page(request, slug)
    try:
        month = cost_report.parse_month(request.GET.get("month"))
    except ValueError:
        month = None
    is_admin = page.role == Role.ADMIN or is_platform_admin(request.user)
    form = CostCapForm(request.POST or None)
    if request.method == "POST":
        if not is_admin:
            raise PermissionDenied(f"Only the admins of {page.tenant.name} set its cost caps.")
        saved = submitted(
            request,
            form,
            lambda data: (
                cost_settings.cost_cap_set(actor=request.user, tenant=page.tenant, **data) or True
            ),
            "Cost cap saved.",
        )
        if saved is not None:
            return redirect("tenant-cost-report", slug=page.tenant.slug)
    if month is None:
        context = page.context(form=form, month_error="Give the month as YYYY-MM.")
        return render(request, "frontend/cost_report.html", context, status=400)
    report = cost_report.monthly_report(tenant=page.tenant, month=month)
    if request.GET.get("format") == "csv":
        response = HttpResponse(cost_report.report_csv(report), content_type="text/csv")
        name = f"gangway-cost-{page.tenant.slug}-{month:%Y-%m}.csv"
        response["Content-Disposition"] = f'attachment; filename="{name}"'
        return response
    context = page.context(
        form=form,
        report=report,
        is_admin=is_admin,
        caps=CostCap.objects.for_tenant(page.tenant),
        previous=(month - timedelta(days=1)).replace(day=1),
    )
    return form_page(request, "frontend/cost_report.html", context)
