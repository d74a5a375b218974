"""Batch jobs: a tenant's list, the new-job form with its live verdict, a job's page with
its live driver log, and its buttons (stop, delete).

Like the cluster pages, each write is one call of the service the jobs API calls
(:mod:`clusters.requests.jobs`), the verdict is :func:`dry_run_verdict`'s and the log is
:func:`clusters.live.driver_logs.driver_log`'s: the dashboard decides only what to show.
"""

from __future__ import annotations

import json
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
from clusters.kinds.rayjob.states import JOB_FINISHED
from clusters.live.driver_logs import LogBounds, driver_log
from clusters.models import ClusterRequest, Workload
from clusters.requests import jobs as services
from clusters.requests import rules
from clusters.requests.dry_run import dry_run_verdict
from controlplane.exceptions import ServiceConflict
from frontend.forms import JobForm
from frontend.views.common import HtmxHttpRequest, TenantPage, require_requester, tenant_page

PAGE_SIZE = 50
# The states a job passes through, in the order it does: the list's filter offers these.
JOB_STATES = (
    State.QUEUED,
    State.ADMITTED,
    State.STARTING,
    State.RUNNING,
    State.SUCCEEDED,
    State.FAILED,
    State.STOPPED,
    State.DELETING,
    State.DELETED,
)
# Once here, a job's driver runs no more: its output can only shrink to the saved tail.
ENDED = JOB_FINISHED | {State.DELETING, State.DELETED}
# The page's tail: enough to see where a run is, small enough to re-send every few seconds.
LOG_BOUNDS = LogBounds(tail=200, limit_bytes=64 * 1024)


def _pk(request: HttpRequest) -> int | None:
    raw = request.GET.get("id", "")
    return int(raw) if raw.isdigit() and len(raw) < 19 else None


def _job(page: TenantPage, name: str, *, pk: int | None = None) -> ClusterRequest:
    """The job a page shows, deleted ones included; a 404 that says what is missing."""
    job = selectors.cluster_for_page(tenant=page.tenant, name=name, pk=pk, workload=Workload.JOB)
    if job is None:
        raise Http404(f"{page.tenant.name} has no job named {name!r}.")
    return job


@login_required
def job_list(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    """A tenant's jobs with where each stands (queue place while it waits), its shape,
    run time and GPU-hours, filtered by the FilterSet the API list uses; htmx polls the
    table partial, as on the clusters list."""
    page = tenant_page(request, slug)
    queryset = selectors.cluster_list(tenant=page.tenant, workload=Workload.JOB)
    if not request.GET.getlist("state"):
        queryset = queryset.not_deleted()  # deleted rows only when asked for
    filterset = ClusterFilter(request.GET or None, queryset=queryset)
    choices = [(state.value, state.label) for state in JOB_STATES]
    filterset.form.fields["state"].choices = choices  # type: ignore[attr-defined]
    filterset.form.fields["state"].widget = forms.CheckboxSelectMultiple(choices=choices)
    jobs = Paginator(filterset.qs, PAGE_SIZE).get_page(request.GET.get("page"))
    for job in jobs:
        # The selector prefetched the usage spans: no query per row.
        job.gpu_hours = round(selectors.gpu_hours_of(job), 2)  # type: ignore[attr-defined]
    query = request.GET.copy()
    query.pop("page", None)
    context = page.context(filter=filterset, jobs=jobs, query=query.urlencode())
    if request.htmx:
        return render(request, "frontend/partials/job_rows.html", context)
    return render(request, "frontend/job_list.html", context)


def _form(request: HttpRequest, page: TenantPage, data: Any = None) -> JobForm:
    hosts = selectors.job_hosts_of(tenant=page.tenant, owner=request.user)
    return JobForm(data, tenant=page.tenant, role=page.role, hosts=hosts)


@login_required
def job_new(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    """The new-job form. A valid submission goes through ``job_create``; its field errors
    come back next to their inputs (``runtime_env.*`` next to the runtime_env ones), a
    per-engineer cap (409) as a banner; success goes to the job's page."""
    page = tenant_page(request, slug)
    require_requester(page)
    form = _form(request, page, request.POST if request.method == "POST" else None)
    banner = ""
    if request.method == "POST" and form.is_valid():
        spec, job = form.specs()
        try:
            created = services.job_create(
                actor=request.user, tenant=page.tenant, spec=spec, job=job, role=page.role
            )
        except ValidationError as exc:
            form.add_service_errors(exc)
        except ServiceConflict as exc:
            banner = exc.message
        else:
            where = "is starting" if created.state == State.STARTING else "is queued"
            messages.success(request, f"{created.name} {where}.")
            return redirect("job-detail", slug=page.tenant.slug, name=created.name)
    status = 409 if banner else (400 if form.is_bound else 200)
    return render(
        request,
        "frontend/job_new.html",
        page.context(form=form, banner=banner, verdict=None),
        status=status,
    )


@login_required
@require_POST
def job_dry_run(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    """The verdict panel for the job form as it stands: :func:`dry_run_verdict` with the
    job, which runs submission's checks first (what it would refuse shows as refused).
    Nothing is written."""
    page = tenant_page(request, slug)
    require_requester(page)
    form = _form(request, page, request.POST)
    verdict = None
    refusal = None
    if form.is_valid():
        spec, job = form.specs()
        try:
            verdict = dry_run_verdict(
                tenant=page.tenant, owner=request.user, spec=spec, job=job, role=page.role
            )
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


def _detail_context(request: HttpRequest, page: TenantPage, job: ClusterRequest) -> dict:
    run = job.job
    return page.context(
        job=job,
        run=run,
        runtime_env=json.dumps(run.runtime_env, indent=2, sort_keys=True)
        if run.runtime_env
        else "",
        may_manage=rules.can_manage(actor=request.user, cluster=job, role=page.role),
        may_stop=job.state in services.STOPPABLE,
        may_delete=job.state not in (State.DELETING, State.DELETED),
        is_final=job.state == State.DELETED,
        events=list(job.events.all())[::-1],
        gpu_hours=round(selectors.gpu_hours_of(job), 2),
    )


def _log_context(page: TenantPage, job: ClusterRequest) -> dict:
    log = driver_log(job, LOG_BOUNDS)
    # A driver that ended and whose pods are gone has said all it will: the saved tail
    # (or nothing) is final, so the panel stops asking.
    ended = job.state in ENDED
    done = job.state == State.DELETED or (ended and log.origin != "pod")
    # ``log_ended``: its output is complete (the panel still asks, until the pods go and
    # the saved tail is final, but nothing new is printed).
    return page.context(job=job, log=log, log_done=done, log_ended=ended)


def _detail_page(
    request: HttpRequest, page: TenantPage, job: ClusterRequest, status: int = 200
) -> HttpResponse:
    context = {**_detail_context(request, page, job), **_log_context(page, job)}
    return render(request, "frontend/job_detail.html", context, status=status)


@login_required
def job_detail(request: HtmxHttpRequest, slug: str, name: str) -> HttpResponse:
    """State and why, queue standing while it waits, what it runs, Ray's view of the run,
    times, GPU-hours, buttons and history; htmx re-fetches the live part every few
    seconds until the job is deleted. The driver's log is its own panel (:func:`job_log`)."""
    page = tenant_page(request, slug)
    job = _job(page, name, pk=_pk(request))
    if request.htmx:
        context = _detail_context(request, page, job)
        # As on a cluster's page: the flash message belonged to the state it was drawn in.
        seen = request.GET.get("seen")
        context["clear_messages"] = bool(seen) and seen != job.state
        return render(request, "frontend/partials/job_live.html", context)
    return _detail_page(request, page, job)


@login_required
@require_safe
def job_log(request: HtmxHttpRequest, slug: str, name: str) -> HttpResponse:
    """The log panel: the last lines of the driver's output through ``driver_log``
    (bounded by :data:`LOG_BOUNDS`), or why there are none. It polls itself until the
    job has ended and its pods are gone."""
    page = tenant_page(request, slug)
    job = _job(page, name, pk=_pk(request))
    return render(request, "frontend/partials/job_log.html", _log_context(page, job))


Action = Callable[[HttpRequest, TenantPage, ClusterRequest], ClusterRequest]
ACTIONS: dict[str, tuple[Action, str]] = {
    "stop": (
        lambda r, p, j: services.job_stop(actor=r.user, request=j, role=p.role),
        "Stopped; its GPUs are released once its pods are gone.",
    ),
    "delete": (
        lambda r, p, j: services.job_delete(actor=r.user, request=j, role=p.role),
        "Deletion requested; its GPUs are released once its pods are gone.",
    ),
}


@login_required
@require_POST
def job_action(request: HtmxHttpRequest, slug: str, name: str, action: str) -> HttpResponse:
    """Run one button's service (stop or delete). A refusal by role is the service's 403;
    by state (409) or value (400), the job's page with the reason under that status;
    success redirects to the job's page."""
    page = tenant_page(request, slug)
    if action not in ACTIONS:
        raise Http404(f"There is no {action!r} action on a job.")
    job = _job(page, name)
    if job.state == State.DELETED:
        raise Http404(f"{name} was deleted; nothing can be done to it any more.")
    run, done = ACTIONS[action]
    try:
        job = run(request, page, job)
    except ServiceConflict as exc:
        messages.error(request, exc.message)
        return _detail_page(request, page, _job(page, name, pk=job.pk), status=409)
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
        return _detail_page(request, page, _job(page, name, pk=job.pk), status=400)
    messages.success(request, done)
    return redirect("job-detail", slug=page.tenant.slug, name=job.name)
