"""The audit log pages: every event (``/audit/``, platform admins) and one tenant's
(``/t/<slug>/audit/``, that tenant's admins and platform admins).

Both filter with :class:`tenants.filters.AuditEventFilter`, the FilterSet of
``GET /api/v1/audit/`` (STYLE 10), and page newest first. Anybody else gets a 404.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from frontend.views.common import tenant_page
from tenants.filters import AuditEventFilter
from tenants.models import AuditEvent, Role
from tenants.selectors import audit_list, is_platform_admin

PAGE_SIZE = 50


def _filtered(
    request: HttpRequest, queryset: QuerySet[AuditEvent], *, tenant_field: bool
) -> dict[str, Any]:
    filterset = AuditEventFilter(request.GET or None, queryset=queryset)
    if not tenant_field:
        del filterset.filters["tenant"]  # the page is about one tenant already
    for name in ("since", "until"):
        # Times are read in UTC, as the page shows them; the browser's picker sends none.
        filterset.form.fields[name].widget = forms.DateTimeInput(attrs={"type": "datetime-local"})
    events = Paginator(filterset.qs, PAGE_SIZE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    return {"filter": filterset, "events": events, "query": query.urlencode()}


@login_required
def audit_page(request: HttpRequest) -> HttpResponse:
    """Every audit event, newest first, filtered (platform admins)."""
    if not is_platform_admin(request.user):
        raise Http404("No such page.")
    context = _filtered(request, audit_list(user=request.user), tenant_field=True)
    return render(request, "frontend/audit.html", context)


@login_required
def tenant_audit_page(request: HttpRequest, slug: str) -> HttpResponse:
    """One tenant's audit events, newest first, filtered (its admins and platform
    admins; its other members get a 404, as for a page that is not theirs)."""
    page = tenant_page(request, slug)
    if page.role != Role.ADMIN and not is_platform_admin(request.user):
        raise Http404("No such page.")
    queryset = audit_list(user=request.user).filter(tenant=page.tenant)
    context = page.context(**_filtered(request, queryset, tenant_field=False))
    return render(request, "frontend/audit.html", context)
