"""One cluster: the new-cluster form with its live verdict, the detail page and the
buttons (suspend, resume, extend, delete). Each button is a POST into the service the
API calls; the services decide who may do what, the page only hides what would fail."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from clusters import selectors, services
from clusters.models import ClusterRequest
from clusters.states import LIVE, State
from clusters.verdicts import dry_run_verdict
from controlplane.exceptions import ServiceConflict
from frontend.forms import ClusterForm
from frontend.views.common import HtmxHttpRequest, TenantPage, tenant_page

EXTEND_CHOICES = (4, 24)


def _form(page: TenantPage, data: Any = None) -> ClusterForm:
    return ClusterForm(data, tenant=page.tenant, role=page.role, kai_enabled=settings.KAI_ENABLED)


def _require_requester(page: TenantPage) -> None:
    # Viewers get no form at all; the service would refuse their submission anyway.
    if not page.may_request:
        raise PermissionDenied("Requesting clusters needs the engineer role.")


@login_required
def cluster_new(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    """The create form. A valid submission goes through ``cluster_request_create``;
    field errors come back next to their fields, a per-engineer cap (409) as a banner."""
    page = tenant_page(request, slug)
    _require_requester(page)
    form = _form(page, request.POST if request.method == "POST" else None)
    banner = ""
    if request.method == "POST" and form.is_valid():
        try:
            cluster = services.cluster_request_create(
                actor=request.user, tenant=page.tenant, **form.attrs()
            )
        except ValidationError as exc:
            form.add_service_errors(exc)
        except ServiceConflict as exc:
            banner = exc.message
        else:
            messages.success(request, f"{cluster.name} is queued.")
            return redirect("cluster-detail", slug=page.tenant.slug, name=cluster.name)
    status = 409 if banner else (400 if form.is_bound else 200)
    return render(
        request,
        "frontend/cluster_new.html",
        page.context(form=form, banner=banner, verdict=None),
        status=status,
    )


@login_required
@require_POST
def cluster_dry_run(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    """The verdict panel for the form as it stands (htmx posts here as the user types).

    Same function as ``POST .../clusters/dry-run/``; nothing is written.
    """
    page = tenant_page(request, slug)
    _require_requester(page)
    form = _form(page, request.POST)
    verdict = None
    if form.is_valid():
        try:
            verdict = dry_run_verdict(tenant=page.tenant, owner=request.user, attrs=form.attrs())
        except ValidationError as exc:
            form.add_service_errors(exc)
    return render(
        request, "frontend/partials/verdict.html", page.context(form=form, verdict=verdict)
    )


def _cluster(page: TenantPage, name: str) -> ClusterRequest:
    queryset = selectors.cluster_detail_queryset(tenant=page.tenant).exclude(state=State.DELETED)
    return get_object_or_404(queryset, name=name)


@login_required
def cluster_detail(request: HtmxHttpRequest, slug: str, name: str) -> HttpResponse:
    """State and why, queue place, connection details, expiry, buttons and history; the
    live part is re-fetched by htmx every few seconds."""
    page = tenant_page(request, slug)
    cluster = _cluster(page, name)
    context = page.context(
        cluster=cluster,
        endpoints=selectors.cluster_endpoints(cluster),
        may_manage=services.can_manage(actor=request.user, cluster=cluster),
        is_live=cluster.state in LIVE,
        extend_choices=EXTEND_CHOICES,
        events=list(cluster.events.all())[::-1],
        manifests_url=reverse(
            "cluster-manifests", kwargs={"tenant_slug": page.tenant.slug, "name": cluster.name}
        )
        + "?format=yaml",
    )
    if request.htmx:
        return render(request, "frontend/partials/cluster_live.html", context)
    return render(request, "frontend/cluster_detail.html", context)


def _extend(request: HttpRequest, cluster: ClusterRequest) -> ClusterRequest:
    try:
        hours = int(request.POST.get("hours", ""))
    except ValueError:
        raise ValidationError({"hours": "Choose how many hours to add."}) from None
    return services.cluster_extend(actor=request.user, cluster=cluster, hours=hours)


ACTIONS: dict[str, tuple[Callable[[HttpRequest, ClusterRequest], ClusterRequest], str]] = {
    "suspend": (
        lambda r, c: services.cluster_suspend(actor=r.user, cluster=c),
        "Suspended; its GPUs went back to the pool.",
    ),
    "resume": (
        lambda r, c: services.cluster_resume(actor=r.user, cluster=c),
        "Resumed; it is back in the queue.",
    ),
    "delete": (
        lambda r, c: services.cluster_delete(actor=r.user, cluster=c),
        "Deletion requested; its GPUs are released once its pods are gone.",
    ),
    "extend": (_extend, "Extended."),
}


@login_required
@require_POST
def cluster_action(request: HtmxHttpRequest, slug: str, name: str, action: str) -> HttpResponse:
    """Run one button's service. A refusal by role is the service's 403; a refusal by
    state (409) or value (400) comes back as a message on the detail page."""
    page = tenant_page(request, slug)
    cluster = _cluster(page, name)
    if action not in ACTIONS:
        raise Http404("No such action.")
    run, done = ACTIONS[action]
    try:
        cluster = run(request, cluster)
    except ServiceConflict as exc:
        messages.error(request, exc.message)
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    else:
        messages.success(request, done)
    return redirect("cluster-detail", slug=page.tenant.slug, name=cluster.name)
