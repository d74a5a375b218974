"""Read-only pages: home, a tenant's cluster list, its queue and its usage."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django import forms
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from clusters import fleet, selectors
from clusters.filters import ClusterFilter
from frontend.views.common import HtmxHttpRequest, tenant_page
from tenants.selectors import is_platform_admin, tenant_list

PAGE_SIZE = 50
USAGE_PERIODS = (7, 30)


@login_required
def home(request: HttpRequest) -> HttpResponse:
    """The user's tenants with GPUs held against quota and clusters by state, and the
    user's own clusters."""
    tenants = list(tenant_list(user=request.user))
    overview = selectors.tenant_overview(tenants=tenants)
    rows = [{"tenant": t, **overview[t.pk]} for t in tenants]
    mine = list(selectors.clusters_of_owner(user=request.user)[:PAGE_SIZE])
    return render(request, "frontend/home.html", {"rows": rows, "mine": mine})


@login_required
def cluster_list(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    """A tenant's clusters, filtered by the FilterSet the API list uses; htmx polls the
    table partial so rows move through their states without a reload."""
    page = tenant_page(request, slug)
    queryset = selectors.cluster_list(tenant=page.tenant)
    if not request.GET.getlist("state"):
        queryset = queryset.not_deleted()  # deleted rows only when asked for
    filterset = ClusterFilter(request.GET or None, queryset=queryset)
    # Same filter as the API; on a page, states read better as checkboxes than a list box.
    filterset.form.fields["state"].widget = forms.CheckboxSelectMultiple(
        choices=filterset.form.fields["state"].choices  # type: ignore[attr-defined]
    )
    clusters = Paginator(filterset.qs, PAGE_SIZE).get_page(request.GET.get("page"))
    for cluster in clusters:
        cluster.endpoints = selectors.cluster_endpoints(cluster)  # type: ignore[attr-defined]
    query = request.GET.copy()
    query.pop("page", None)
    context = page.context(filter=filterset, clusters=clusters, query=query.urlencode())
    if request.htmx:
        return render(request, "frontend/partials/cluster_rows.html", context)
    return render(request, "frontend/cluster_list.html", context)


@login_required
def queue(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    """The tenant's waiting requests in queue order, with reason and ETA."""
    page = tenant_page(request, slug)
    waiting = Paginator(selectors.queue_list(tenant=page.tenant), PAGE_SIZE).get_page(
        request.GET.get("page")
    )
    # Another tenant's name is not for its members' eyes (STYLE 3): a platform admin's only.
    viewer = None if is_platform_admin(request.user) else page.tenant.slug
    _attach_notes(waiting, fleet.queue_notes(viewer=viewer))
    context = page.context(waiting=waiting)
    if request.htmx:
        return render(request, "frontend/partials/queue_rows.html", context)
    return render(request, "frontend/queue.html", context)


def _attach_notes(waiting: Any, notes: dict[int, str]) -> None:
    """Give each waiting request on the page why another tenant's request is ahead of it
    (``order_note``, empty when none is)."""
    for cluster in waiting:
        cluster.order_note = notes.get(cluster.pk, "")


@login_required
def usage(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    """GPU-hours per user and flavor over the last 7 or 30 days (chargeback)."""
    page = tenant_page(request, slug)
    try:
        days = int(request.GET.get("days", 30))
    except ValueError:
        days = 30
    days = days if days in USAGE_PERIODS else 30
    until = timezone.now()
    summary = selectors.usage_summary(
        tenant=page.tenant, since=until - timedelta(days=days), until=until
    )
    peak = max((row["gpu_hours"] for row in summary["by_user"]), default=0) or 1
    for row in summary["by_user"]:
        row["percent"] = round(100 * row["gpu_hours"] / peak)
    return render(
        request,
        "frontend/usage.html",
        page.context(summary=summary, days=days, periods=USAGE_PERIODS),
    )


@login_required
def global_queue(request: HttpRequest) -> HttpResponse:
    """Every tenant's waiting requests, in each flavor's queue order (platform admins).

    Anybody else gets a 404, like any page they may not see.
    """
    if not is_platform_admin(request.user):
        raise Http404("No such page.")
    waiting = Paginator(selectors.queue_list(), PAGE_SIZE).get_page(request.GET.get("page"))
    _attach_notes(waiting, fleet.queue_notes())
    return render(request, "frontend/global_queue.html", {"waiting": waiting})
