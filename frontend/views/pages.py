"""Read-only pages: home and the queues (a tenant's lists: :mod:`.workloads`; usage:
:mod:`.usage`)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from clusters import selectors
from clusters.live import fleet
from clusters.members.quota_caps import quota_cap_list
from frontend.kinds import all_pages, route_names
from frontend.views.common import HtmxHttpRequest, tenant_page
from tenants.selectors import is_platform_admin, tenant_list

PAGE_SIZE = 50


@login_required
def home(request: HttpRequest) -> HttpResponse:
    """The user's tenants with GPUs held against quota and each kind's requests by state,
    and the user's own requests."""
    tenants = list(tenant_list(user=request.user))
    overview = selectors.tenant_overview(tenants=tenants)
    # Each tenant's caps per Kubernetes cluster of the fleet (docs/fleet.md), one query.
    caps: dict[int, list[Any]] = {}
    for cap in quota_cap_list().filter(tenant__in=tenants) if tenants else ():
        caps.setdefault(cap.tenant_id, []).append(cap)
    rows = [
        {
            "tenant": t,
            **overview[t.pk],
            "kinds": _kind_counts(overview[t.pk]),
            "caps": caps.get(t.pk, []),
        }
        for t in tenants
    ]
    mine = list(selectors.clusters_of_owner(user=request.user)[:PAGE_SIZE])
    return render(request, "frontend/home.html", {"rows": rows, "mine": mine})


def _kind_counts(overview: dict[str, Any]) -> list[dict[str, Any]]:
    """Each kind a tenant has live requests of: its heading, its list's URL name and its
    requests by state (every kind of the registry, in its order)."""
    return [
        {"heading": kind.HEADING, "list": route_names(kind)["list"], "states": states}
        for kind in all_pages().values()
        if (states := overview["states"].get(kind.WORKLOAD))
    ]


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
def global_queue(request: HttpRequest) -> HttpResponse:
    """Every tenant's waiting requests, in each flavor's queue order (platform admins).

    Anybody else gets a 404, like any page they may not see.
    """
    if not is_platform_admin(request.user):
        raise Http404("No such page.")
    waiting = Paginator(selectors.queue_list(), PAGE_SIZE).get_page(request.GET.get("page"))
    _attach_notes(waiting, fleet.queue_notes())
    return render(request, "frontend/global_queue.html", {"waiting": waiting})
