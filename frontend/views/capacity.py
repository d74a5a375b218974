"""The platform's capacity page: per GPU flavor and per node (platform admins)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import render

from clusters.live import fleet
from frontend.views.common import HtmxHttpRequest
from tenants.selectors import is_platform_admin


@login_required
def capacity_page(request: HtmxHttpRequest) -> HttpResponse:
    """Nodes, GPUs allocatable, allocated and free, whole nodes free, GPUs held per
    tenant and waiting demand per flavor (and each member's share of a fleet), and a grid
    of nodes with the clusters on each; htmx polls the live part. Anybody but a platform
    admin gets a 404, as on the global queue: the page names every tenant."""
    if not is_platform_admin(request.user):
        raise Http404("No such page.")
    flavors = fleet.capacity_by_flavor()
    stock = fleet.stock_by_member()
    # Per member only when the fleet has several: one member's figures are the totals.
    if len({s.member for rows in stock.values() for s in rows}) > 1:
        for f in flavors:
            f.members = stock.get(f.flavor.pk, [])
    context = {"flavors": flavors, "grid": fleet.node_grid()}
    if request.htmx:
        return render(request, "frontend/partials/capacity_live.html", context)
    return render(request, "frontend/capacity.html", context)
