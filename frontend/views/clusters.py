"""One cluster: the new-cluster form with its live verdict, the detail page (a deleted
cluster's final record included), its manifests and the buttons (suspend, resume,
extend, delete). Each button is a POST into the service the API calls; the services
decide who may do what, the page only hides what would fail."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST, require_safe

from clusters import selectors
from clusters.domain.states import LIVE, State
from clusters.kube.manifests import cluster_manifests, to_yaml
from clusters.live import pod_logs as cluster_logs
from clusters.live.driver_logs import LogBounds
from clusters.models import ClusterRequest, Workload
from clusters.queue.backends import manifest_options
from clusters.requests import rules, services
from clusters.requests.dry_run import dry_run_verdict
from controlplane.exceptions import ServiceConflict
from frontend.forms import ClusterForm, ExtendForm
from frontend.views.common import HtmxHttpRequest, TenantPage, require_requester, tenant_page

EXTEND_CHOICES = (4, 24)
LOG_TAILS = (100, 200, 1000, 5000)


def _form(page: TenantPage, data: Any = None) -> ClusterForm:
    return ClusterForm(data, tenant=page.tenant, role=page.role, kai_enabled=settings.KAI_ENABLED)


@login_required
def cluster_new(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    """The create form. A valid submission goes through ``cluster_request_create``;
    field errors come back next to their fields, a per-engineer cap (409) as a banner."""
    page = tenant_page(request, slug)
    require_requester(page)
    form = _form(page, request.POST if request.method == "POST" else None)
    banner = ""
    if request.method == "POST" and form.is_valid():
        try:
            cluster = services.cluster_request_create(
                actor=request.user, tenant=page.tenant, spec=form.spec()
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

    Same function as ``POST .../clusters/dry-run/``, which runs submission's checks
    first: what submission would refuse, the panel shows as refused, for the same
    reason. Nothing is written.
    """
    page = tenant_page(request, slug)
    require_requester(page)
    form = _form(page, request.POST)
    verdict = None
    refusal = None
    if form.is_valid():
        try:
            verdict = dry_run_verdict(tenant=page.tenant, owner=request.user, spec=form.spec())
        except ValidationError as exc:
            form.add_service_errors(exc)
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


def _pk(request: HttpRequest) -> int | None:
    raw = request.GET.get("id", "")
    return int(raw) if raw.isdigit() and len(raw) < 19 else None


def _cluster(
    page: TenantPage,
    name: str,
    *,
    pk: int | None = None,
    workload: str | None = Workload.CLUSTER,
) -> ClusterRequest:
    """The cluster a page shows, deleted ones included; a 404 that says what is missing."""
    cluster = selectors.cluster_for_page(tenant=page.tenant, name=name, pk=pk, workload=workload)
    if cluster is None:
        raise Http404(f"{page.tenant.name} has no cluster named {name!r}.")
    return cluster


def _live_cluster(
    page: TenantPage, name: str, *, workload: str | None = Workload.CLUSTER
) -> ClusterRequest:
    """A cluster (or any request: ``workload=None``) that buttons may act on: never a
    deleted one."""
    cluster = _cluster(page, name, workload=workload)
    if cluster.state == State.DELETED:
        raise Http404(f"{name} was deleted; nothing can be done to it any more.")
    return cluster


def _detail_context(request: HttpRequest, page: TenantPage, cluster: ClusterRequest) -> dict:
    return page.context(
        cluster=cluster,
        endpoints=selectors.cluster_endpoints(
            cluster, base_url=request.build_absolute_uri("/").rstrip("/")
        ),
        may_manage=rules.can_manage(actor=request.user, cluster=cluster),
        may_extend=services.can_extend(cluster),
        is_live=cluster.state in LIVE,
        is_final=cluster.state == State.DELETED,
        extend_choices=EXTEND_CHOICES,
        events=list(cluster.events.all())[::-1],
        gpu_hours=selectors.cluster_gpu_hours(cluster),
        activity=selectors.cluster_activity(cluster),
    )


def _detail_page(
    request: HttpRequest, page: TenantPage, cluster: ClusterRequest, status: int = 200
) -> HttpResponse:
    context = _detail_context(request, page, cluster)
    if cluster.state != State.DELETED:
        context["manifests_yaml"] = to_yaml(cluster_manifests(cluster, **manifest_options()))
    return render(request, "frontend/cluster_detail.html", context, status=status)


@login_required
def cluster_detail(request: HtmxHttpRequest, slug: str, name: str) -> HttpResponse:
    """State and why, queue place, connection details, expiry, usage, buttons, history
    and manifests; the live part is re-fetched by htmx every few seconds until the
    cluster is deleted, when the page becomes its final, read-only record."""
    page = tenant_page(request, slug)
    cluster = _cluster(page, name, pk=_pk(request))
    if request.htmx:
        context = _detail_context(request, page, cluster)
        # The flash messages above the fragment ("… is queued") were about the state the
        # page was drawn in: once the state moves on, the poll's answer removes them.
        seen = request.GET.get("seen")
        context["clear_messages"] = bool(seen) and seen != cluster.state
        return render(request, "frontend/partials/cluster_live.html", context)
    return _detail_page(request, page, cluster)


@login_required
@require_safe
def cluster_manifests_download(request: HttpRequest, slug: str, name: str) -> HttpResponse:
    """The cluster's Kubernetes objects as a YAML file (``kubectl apply -f`` ready)."""
    page = tenant_page(request, slug)
    cluster = _live_cluster(page, name)
    response = HttpResponse(
        to_yaml(cluster_manifests(cluster, **manifest_options())),
        content_type="application/yaml; charset=utf-8",
    )
    response["Content-Disposition"] = f'attachment; filename="{cluster.name}.yaml"'
    return response


def _extend(request: HttpRequest, cluster: ClusterRequest) -> ClusterRequest:
    form = ExtendForm(request.POST)
    if not form.is_valid():
        raise ValidationError(list(form.errors["hours"]))
    return services.cluster_extend(
        actor=request.user, cluster=cluster, hours=form.cleaned_data["hours"]
    )


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
    "keepalive": (
        lambda r, c: services.cluster_keepalive(actor=r.user, cluster=c),
        "Kept alive: its idle clock starts again.",
    ),
}


@login_required
@require_POST
def cluster_action(request: HtmxHttpRequest, slug: str, name: str, action: str) -> HttpResponse:
    """Run one button's service. A refusal by role is the service's 403; a refusal by
    state (409) or value (400) is the detail page with the reason, under that status;
    success redirects to the detail page."""
    page = tenant_page(request, slug)
    if action not in ACTIONS:
        raise Http404(f"There is no {action!r} action on a cluster.")
    cluster = _live_cluster(page, name)
    run, done = ACTIONS[action]
    try:
        cluster = run(request, cluster)
    except ServiceConflict as exc:
        messages.error(request, exc.message)
        return _detail_page(request, page, _cluster(page, name, pk=cluster.pk), status=409)
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
        return _detail_page(request, page, _cluster(page, name, pk=cluster.pk), status=400)
    messages.success(request, done)
    return redirect("cluster-detail", slug=page.tenant.slug, name=cluster.name)


@login_required
@require_safe
def cluster_log(request: HtmxHttpRequest, slug: str, name: str) -> HttpResponse:
    """The log panel of the cluster page: one pod's tail (the head's unless ``?pod=``),
    re-fetched by htmx every few seconds while "follow" is on."""
    page = tenant_page(request, slug)
    cluster = _live_cluster(page, name)
    try:
        bounds = LogBounds.parse(request.GET)
        pod, container = cluster_logs.parse_choice(request.GET)
    except ValidationError as exc:
        raise Http404(" ".join(exc.messages)) from exc
    found = cluster_logs.pod_log(cluster, pod=pod, container=container, bounds=bounds)
    # The first load follows; after that the form says (an unticked box is not sent).
    follow = "pod" not in request.GET or request.GET.get("follow") == "1"
    return render(
        request,
        "frontend/partials/cluster_log.html",
        page.context(
            cluster=cluster, log=found, follow=follow, tail=bounds.tail, tail_choices=LOG_TAILS
        ),
    )
