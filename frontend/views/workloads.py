"""The pages of a tenant's requests, one set for every workload kind: the list, the
new form with its live verdict, a request's page (a deleted one's final record included),
its log panel, its manifests and its buttons. Each view takes the kind's ``workload``
from the URL configuration and fills the shared templates from :func:`pages_for`; each
write is one call of the service the API calls, so the page only decides what to show."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST, require_safe

from clusters import selectors
from clusters.domain.states import State
from clusters.filters import ClusterFilter
from clusters.models import ClusterRequest
from clusters.requests import rules
from controlplane.exceptions import ServiceConflict
from frontend.kinds import KindPages, pages_for, route_names
from frontend.views.common import (
    HtmxHttpRequest,
    TenantPage,
    live_request,
    request_for_page,
    require_requester,
    tenant_page,
)

PAGE_SIZE = 50


def _pk(request: HttpRequest) -> int | None:
    raw = request.GET.get("id", "")
    return int(raw) if raw.isdigit() and len(raw) < 19 else None


def _row(page: TenantPage, kind: KindPages, name: str, pk: int | None = None) -> ClusterRequest:
    return request_for_page(page, name, workload=kind.WORKLOAD, noun=kind.NOUN, pk=pk)


def _context(page: TenantPage, kind: KindPages, **extra: Any) -> dict[str, Any]:
    return page.context(kind=kind, urls=route_names(kind), **extra)


@login_required
def workload_list(request: HtmxHttpRequest, slug: str, workload: str) -> HttpResponse:
    """A tenant's requests of one kind, filtered by the FilterSet the API list uses; htmx
    polls the table partial so rows move through their states without a reload."""
    page = tenant_page(request, slug)
    kind = pages_for(workload)
    queryset = selectors.cluster_list(tenant=page.tenant, workload=workload)
    if not request.GET.getlist("state"):
        queryset = queryset.not_deleted()  # deleted rows only when asked for
    filterset = ClusterFilter(request.GET or None, queryset=queryset)
    state = filterset.form.fields["state"]
    if kind.LIST_STATES is not None:
        state.choices = [(s.value, s.label) for s in map(State, kind.LIST_STATES)]
    # Same filter as the API; on a page, states read better as checkboxes than a list box.
    state.widget = forms.CheckboxSelectMultiple(choices=state.choices)
    rows = Paginator(filterset.qs, PAGE_SIZE).get_page(request.GET.get("page"))
    for row in rows:
        kind.annotate_row(row)
    query = request.GET.copy()
    query.pop("page", None)
    context = _context(page, kind, filter=filterset, rows=rows, query=query.urlencode())
    if request.htmx:
        return render(request, "frontend/partials/workload_rows.html", context)
    return render(request, "frontend/workload_list.html", context)


def _new_form(
    request: HttpRequest, slug: str, workload: str, data: Any
) -> tuple[TenantPage, KindPages, Any]:
    """The tenant's page, the kind and its create form (``data``: a submission) for one
    who may make requests there."""
    page = tenant_page(request, slug)
    kind = pages_for(workload)
    require_requester(page)
    form = kind.NEW_FORM(data, tenant=page.tenant, role=page.role, user=request.user)
    return page, kind, form


def _checked(form: Any, call: Callable[..., Any], **given: Any) -> Any:
    """``call`` with the valid form's request (``spec``, ``details``) and ``given``; a
    service's ``ValidationError`` goes back onto the form's fields (None returned)."""
    spec, details = form.specs()
    try:
        return call(spec=spec, details=details, **given)
    except ValidationError as exc:
        form.add_service_errors(exc)
        return None


@login_required
def workload_new(request: HtmxHttpRequest, slug: str, workload: str) -> HttpResponse:
    """The create form. A valid submission goes through the kind's create service; field
    errors come back next to their fields, a per-engineer cap (409) as a banner; success
    goes to the new request's page."""
    data = request.POST if request.method == "POST" else None
    page, kind, form = _new_form(request, slug, workload, data)
    banner = ""
    created = None
    if request.method == "POST" and form.is_valid():
        try:
            created = _checked(
                form, kind.create, actor=request.user, tenant=page.tenant, role=page.role
            )
        except ServiceConflict as exc:
            banner = exc.message
        if created is not None:
            where = "is starting" if created.state == State.STARTING else "is queued"
            messages.success(request, f"{created.name} {where}.")
            return redirect(route_names(kind)["detail"], slug=page.tenant.slug, name=created.name)
    status = 409 if banner else (400 if form.is_bound else 200)
    return render(
        request,
        "frontend/workload_new.html",
        _context(page, kind, form=form, banner=banner, verdict=None),
        status=status,
    )


@login_required
@require_POST
def workload_verdict(request: HtmxHttpRequest, slug: str, workload: str) -> HttpResponse:
    """The verdict panel for the form as it stands (htmx posts here as the user types).

    Same function as the API's dry run, which runs submission's checks first: what
    submission would refuse, the panel shows as refused, for the same reason. Nothing is
    written.
    """
    page, kind, form = _new_form(request, slug, workload, request.POST)
    verdict = None
    refusal = None
    if form.is_valid():
        try:
            verdict = _checked(
                form, kind.verdict, tenant=page.tenant, owner=request.user, role=page.role
            )
        except (ServiceConflict, PermissionDenied) as exc:
            refusal = {
                "code": getattr(exc, "code", "permission_denied"),
                "message": getattr(exc, "message", str(exc)),
            }
    return render(
        request,
        "frontend/partials/verdict.html",
        page.context(form=form, verdict=verdict, refusal=refusal),
    )


def _detail_context(
    request: HttpRequest, page: TenantPage, kind: KindPages, row: ClusterRequest
) -> dict[str, Any]:
    return _context(
        page,
        kind,
        row=row,
        may_manage=rules.can_manage(actor=request.user, cluster=row, role=page.role),
        is_final=row.state == State.DELETED,
        offers_manifests=kind.MANIFESTS is not None,
        events=list(row.events.all())[::-1],
        **kind.detail_context(
            row,
            actor=request.user,
            role=page.role,
            base_url=request.build_absolute_uri("/").rstrip("/"),
        ),
    )


def detail_page(
    request: HttpRequest,
    page: TenantPage,
    kind: KindPages,
    row: ClusterRequest,
    status: int = 200,
    **extra: Any,
) -> HttpResponse:
    """The request's whole page, with ``extra`` in its context (a secret shown once)."""
    context = {**_detail_context(request, page, kind, row), **kind.page_context(row), **extra}
    context["title"] = kind.DETAIL_TITLE.format(name=row.name, tenant=page.tenant.slug)
    return render(request, "frontend/workload_detail.html", context, status=status)


@login_required
def workload_detail(request: HtmxHttpRequest, slug: str, name: str, workload: str) -> HttpResponse:
    """State and why, queue place, the kind's sections, buttons and history; htmx re-fetches
    the live part every few seconds until the request is deleted, when the page becomes its
    final, read-only record."""
    page = tenant_page(request, slug)
    kind = pages_for(workload)
    row = _row(page, kind, name, pk=_pk(request))
    if request.htmx:
        context = _detail_context(request, page, kind, row)
        # The flash messages above the fragment ("… is queued") were about the state the
        # page was drawn in: once the state moves on, the poll's answer removes them.
        seen = request.GET.get("seen")
        context["clear_messages"] = bool(seen) and seen != row.state
        return render(request, "frontend/partials/workload_live.html", context)
    return detail_page(request, page, kind, row)


@login_required
@require_safe
def workload_log(request: HtmxHttpRequest, slug: str, name: str, workload: str) -> HttpResponse:
    """The kind's log panel, re-fetched by htmx while it may still change."""
    page = tenant_page(request, slug)
    kind = pages_for(workload)
    row = _row(page, kind, name, pk=_pk(request))
    try:
        log = kind.log_context(row, request.GET)
    except ValidationError as exc:
        raise Http404(" ".join(exc.messages)) from exc
    return render(request, f"{kind.TEMPLATES}log.html", _context(page, kind, row=row, **log))


@login_required
@require_safe
def workload_manifests(request: HttpRequest, slug: str, name: str, workload: str) -> HttpResponse:
    """The request's Kubernetes objects as a YAML file (``kubectl apply -f`` ready)."""
    page = tenant_page(request, slug)
    kind = pages_for(workload)
    if kind.MANIFESTS is None:
        raise Http404(f"A {kind.NOUN}'s page offers no manifests.")
    row = live_request(page, name, workload=kind.WORKLOAD, noun=kind.NOUN)
    response = HttpResponse(kind.MANIFESTS(row), content_type="application/yaml; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{row.name}.yaml"'
    return response


@login_required
@require_POST
def workload_action(
    request: HtmxHttpRequest, slug: str, name: str, action: str, workload: str
) -> HttpResponse:
    """Run one button's service. A refusal by role is the service's 403; a refusal by
    state (409) or value (400) is the request's page with the reason, under that status;
    success redirects to the request's page."""
    page = tenant_page(request, slug)
    kind = pages_for(workload)
    if action not in kind.ACTIONS:
        raise Http404(f"There is no {action!r} action on a {kind.NOUN}.")
    row = live_request(page, name, workload=kind.WORKLOAD, noun=kind.NOUN)
    run, done = kind.ACTIONS[action]
    try:
        row = run(request.user, row, page.role, request.POST)
    except ServiceConflict as exc:
        messages.error(request, exc.message)
        fresh = _row(page, kind, name, pk=row.pk)
        return detail_page(request, page, kind, fresh, status=409)
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
        fresh = _row(page, kind, name, pk=row.pk)
        return detail_page(request, page, kind, fresh, status=400)
    messages.success(request, done)
    return redirect(route_names(kind)["detail"], slug=page.tenant.slug, name=row.name)
