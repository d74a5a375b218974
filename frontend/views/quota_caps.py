"""Caps on a tenant's quota per Kubernetes cluster, on the platform's page of the tenant
beside its quota (platform admins only; a 404 for anybody else). The write is the
service the API calls (:mod:`clusters.members.quota_caps`)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from clusters.members.quota_caps import quota_cap_set
from frontend.kube_cluster_forms import quota_cap_form
from frontend.views import platform


@login_required
@require_POST
def tenant_quota_cap(request: HttpRequest, slug: str) -> HttpResponse:
    """Set or remove (no GPUs given) one cap on the tenant's quota in one member."""
    platform.require_platform_admin(request)
    row = platform.platform_tenant(slug)
    form = quota_cap_form(request.POST)

    def done(data: dict[str, Any]) -> str:
        where = f"{data['flavor']} on {data['kube_cluster']}"
        if data["gpus"] is None:
            return f"{row.slug} has no cap on {where} now."
        return f"{row.slug} may hold at most {data['gpus']} {where}."

    saved = platform.submitted(
        request,
        form,
        lambda data: quota_cap_set(actor=request.user, tenant=row.slug, **data) or True,
        done,
    )
    if saved is not None:
        return redirect("platform-tenant", slug=row.slug)
    return platform.tenant_page(request, row, cap=form, status=400)
