"""Fair share, explained: per cohort, tenant and flavor (platform admins)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import render

from clusters.live import fleet
from frontend.views.common import HtmxHttpRequest
from tenants.selectors import is_platform_admin


@login_required
def fairshare_page(request: HtmxHttpRequest) -> HttpResponse:
    """Nominal, used, borrowed and lent GPUs, weights and weighted dominant shares, and
    CPU and memory quotas where they bind, per cohort; htmx polls the live part. Anybody
    but a platform admin gets a 404, as on the global queue."""
    if not is_platform_admin(request.user):
        raise Http404("No such page.")
    context = {"cohorts": fleet.fair_share_by_cohort()}
    if request.htmx:
        return render(request, "frontend/partials/fairshare_live.html", context)
    return render(request, "frontend/fairshare.html", context)
