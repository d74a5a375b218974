"""What every tenant page needs: the tenant from the URL, scoped to the user, and their role."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django_htmx.middleware import HtmxDetails

from clusters import selectors
from clusters.domain.states import State
from clusters.models import ClusterKind, ClusterRequest
from clusters.requests import rules
from tenants.models import Role, Tenant
from tenants.selectors import role_in_tenant


class HtmxHttpRequest(HttpRequest):
    """A request as ``django_htmx``'s middleware leaves it (for type checking)."""

    htmx: HtmxDetails


@dataclass(frozen=True)
class TenantPage:
    """The tenant a page is about and what the signed-in user may do there."""

    tenant: Tenant
    role: str | None

    @property
    def may_request(self) -> bool:
        """Engineers and admins request clusters; viewers only read."""
        return rules.may_request(role=self.role, kind=ClusterKind.DEV)

    def context(self, **extra: Any) -> dict[str, Any]:
        """The template context every tenant page starts from."""
        return {"tenant": self.tenant, "role": self.role, "may_request": self.may_request, **extra}


def tenant_page(request: HttpRequest, slug: str) -> TenantPage:
    """Resolve ``slug`` among the tenants the user may see; anything else is a 404, so a
    page never confirms that another tenant exists (STYLE 3)."""
    tenant = Tenant.objects.visible_to(request.user).filter(slug=slug).first()
    if tenant is None:
        raise Http404(f"You are not a member of a tenant called {slug!r}.")
    return TenantPage(tenant=tenant, role=role_in_tenant(user=request.user, tenant=tenant))


def admin_page(request: HttpRequest, slug: str, what: str = "this") -> TenantPage:
    """The tenant page of one of its admins; a member who is not gets a 403 saying that
    only the admins manage ``what``."""
    page = tenant_page(request, slug)
    if page.role != Role.ADMIN:
        raise PermissionDenied(f"Only the admins of {page.tenant.name} manage {what}.")
    return page


def require_requester(page: TenantPage) -> None:
    """Viewers get no create form at all; the service would refuse their submission anyway."""
    if not page.may_request:
        raise PermissionDenied(rules.requester_refusal(tenant=page.tenant, role=page.role))


def request_for_page(
    page: TenantPage, name: str, *, workload: str | None, noun: str, pk: int | None = None
) -> ClusterRequest:
    """The request of one kind (any: ``workload=None``) a page shows, deleted ones
    included; a 404 that says what is missing, calling it a ``noun``."""
    row = selectors.cluster_for_page(tenant=page.tenant, name=name, pk=pk, workload=workload)
    if row is None:
        raise Http404(f"{page.tenant.name} has no {noun} named {name!r}.")
    return row


def live_request(page: TenantPage, name: str, *, workload: str | None, noun: str) -> ClusterRequest:
    """A request that buttons may act on: never a deleted one."""
    row = request_for_page(page, name, workload=workload, noun=noun)
    if row.state == State.DELETED:
        raise Http404(f"{name} was deleted; nothing can be done to it any more.")
    return row


def form_page(request: HttpRequest, template: str, context: dict[str, Any]) -> HttpResponse:
    """Render a page that shows ``context["form"]``: a 400 while that form has errors."""
    return render(request, template, context, status=400 if context["form"].errors else 200)
