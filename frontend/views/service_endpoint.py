"""A service page's endpoint controls: create an invoke token (its secret shown once on
the page that answers), revoke one, and make the endpoint public or private. The rules
are ``clusters/kinds/rayservice/endpoint_access.py``'s; a refusal by role is its 403."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from clusters.kinds.rayservice import endpoint_access
from clusters.models import ClusterRequest, ServiceToken, Workload
from frontend.kinds import pages_for
from frontend.views.common import TenantPage, live_request, tenant_page
from frontend.views.workloads import detail_page


def _service(request: HttpRequest, slug: str, name: str) -> tuple[TenantPage, ClusterRequest]:
    """The tenant's page and its live service ``name``."""
    page = tenant_page(request, slug)
    kind = pages_for(Workload.SERVICE)
    return page, live_request(page, name, workload=kind.WORKLOAD, noun=kind.NOUN)


@login_required
@require_POST
def service_token_create(request: HttpRequest, slug: str, name: str) -> HttpResponse:
    """A new invoke token; the service's page with its secret, this once."""
    page, row = _service(request, slug, name)
    try:
        token, secret = endpoint_access.service_token_create(
            actor=request.user, request=row, name=request.POST.get("name", ""), role=page.role
        )
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
        return detail_page(request, page, pages_for(row.workload), row, status=400)
    return detail_page(
        request, page, pages_for(row.workload), row, status=201, new_token=token, new_secret=secret
    )


@login_required
@require_POST
def service_token_revoke(request: HttpRequest, slug: str, name: str, token_id: int) -> HttpResponse:
    """Revoke one invoke token; back to the service's page."""
    page, row = _service(request, slug, name)
    try:
        token = endpoint_access.service_token_revoke(
            actor=request.user, request=row, token_id=token_id, role=page.role
        )
    except ServiceToken.DoesNotExist:
        raise Http404(f"{row.name} has no such token.") from None
    messages.success(request, f"Token {token.name} revoked; it no longer invokes {row.name}.")
    return redirect("service-detail", slug=page.tenant.slug, name=row.name)


@login_required
@require_POST
def service_public(request: HttpRequest, slug: str, name: str) -> HttpResponse:
    """Make the endpoint public (``public=1``) or private (a tenant admin)."""
    page, row = _service(request, slug, name)
    public = request.POST.get("public") == "1"
    endpoint_access.service_public_set(
        actor=request.user, request=row, public=public, role=page.role
    )
    said = "public: it answers without a token" if public else "private: callers need a token"
    messages.success(request, f"{row.name}'s endpoint is now {said}.")
    return redirect("service-detail", slug=page.tenant.slug, name=row.name)
