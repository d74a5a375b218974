"""A tenant admin's pages: members and roles, the tenant's policy, and the queue
controls on one request (priority, hold, release, suspend with a reason).

Members of the tenant who are not its admins get a 403 that says who may; anybody
outside the tenant a 404 (``tenant_page``). Platform admins act as admins of every
tenant. Writes go through the services the API calls, audited with the signed-in user.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from clusters.domain.states import State
from clusters.requests import controls
from clusters.requests import services as requests
from frontend import admin_forms as f
from frontend.views.common import TenantPage, admin_page, form_page, live_request
from frontend.views.platform import run, submitted
from tenants import selectors, services
from tenants.models import Membership, Role


def _grantable(role: str) -> list[tuple[str, str]]:
    return [(value, label) for value, label in Role.choices if Role.rank(value) <= Role.rank(role)]


@login_required
def members(request: HttpRequest, slug: str) -> HttpResponse:
    """The tenant's members with their roles; add a member, change a role, remove one.
    Roles above the admin's own are never offered."""
    page = admin_page(request, slug)
    form = f.MemberAddForm(request.POST or None)
    form.fields["role"].choices = _grantable(page.role or "")  # type: ignore[attr-defined]
    added = submitted(
        request,
        form,
        lambda data: services.membership_add(
            actor=request.user, tenant=page.tenant, username=data["username"], role=data["role"]
        ),
        lambda data: f"{data['username']} is now {data['role']} of {page.tenant.slug}.",
    )
    if added is not None:
        return redirect("tenant-members-page", slug=page.tenant.slug)
    return form_page(
        request,
        "frontend/tenant/members.html",
        page.context(
            form=form,
            members=selectors.membership_list(tenant=page.tenant),
            roles=_grantable(page.role or ""),
        ),
    )


def _membership(page: TenantPage, username: str) -> Membership:
    return get_object_or_404(selectors.membership_list(tenant=page.tenant), user__username=username)


@login_required
@require_POST
def member_role(request: HttpRequest, slug: str, username: str) -> HttpResponse:
    """Change one member's role."""
    page = admin_page(request, slug)
    membership = _membership(page, username)
    form = f.MemberRoleForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Choose a role: admin, engineer or viewer.")
    else:
        role = form.cleaned_data["role"]
        run(
            request,
            form,
            lambda: services.membership_set_role(
                actor=request.user, membership=membership, role=role
            ),
            f"{username} is now {role}.",
        )
        for error in form.non_field_errors():
            messages.error(request, str(error))
    return redirect("tenant-members-page", slug=page.tenant.slug)


@login_required
@require_POST
def member_remove(request: HttpRequest, slug: str, username: str) -> HttpResponse:
    """Take a member out of the tenant (never its last admin)."""
    page = admin_page(request, slug)
    membership = _membership(page, username)
    form = f.ReasonForm({})
    run(
        request,
        form,
        lambda: services.membership_remove(actor=request.user, membership=membership),
        f"{username} is no longer a member of {page.tenant.slug}.",
    )
    for error in form.non_field_errors():
        messages.error(request, str(error))
    return redirect("tenant-members-page", slug=page.tenant.slug)


@login_required
def policy(request: HttpRequest, slug: str) -> HttpResponse:
    """The tenant's policy as its admins may set it: per-engineer caps, the default dev
    TTL (within the platform's maximum), the idle policy and pip direct URLs."""
    page = admin_page(request, slug)
    form = f.PolicyForm(
        request.POST or None,
        instance=selectors.tenant_list(user=request.user).get(pk=page.tenant.pk),
    )
    saved = submitted(
        request,
        form,
        lambda data: services.tenant_policy_update(
            actor=request.user,
            tenant=page.tenant,
            changes={k: data[k] for k in form.changed_data},
        ),
        f"Saved the policy of {page.tenant.slug}.",
    )
    if saved is not None:
        return redirect("tenant-policy-page", slug=page.tenant.slug)
    return form_page(
        request,
        "frontend/tenant/policy.html",
        page.context(form=form),
    )


# --- Queue controls on one request ----------------------------------------------------


def _suspend(request: HttpRequest, cluster: Any, form: f.ReasonForm) -> Any:
    return requests.cluster_suspend(
        actor=request.user, cluster=cluster, why=form.cleaned_data["reason"]
    )


CONTROLS: dict[str, tuple[type[f.ReasonForm], Callable[..., Any], str]] = {
    "priority": (
        f.PriorityForm,
        lambda request, cluster, form: controls.cluster_set_priority(
            actor=request.user,
            cluster=cluster,
            priority=form.cleaned_data["priority"],
            reason=form.cleaned_data["reason"],
        ),
        "Priority changed.",
    ),
    "hold": (
        f.ReasonForm,
        lambda request, cluster, form: controls.cluster_hold(
            actor=request.user, cluster=cluster, reason=form.cleaned_data["reason"]
        ),
        "On hold: the queue passes over it until it is released.",
    ),
    "release": (
        f.ReasonForm,
        lambda request, cluster, form: controls.cluster_release(
            actor=request.user, cluster=cluster, reason=form.cleaned_data["reason"]
        ),
        "Released: it is back in the queue.",
    ),
    "suspend": (f.ReasonForm, _suspend, "Suspended: its GPUs are back in the pool."),
}


@login_required
def manage(request: HttpRequest, slug: str, name: str, control: str = "") -> HttpResponse:
    """One request's queue controls (GET), and each control's submission (POST)."""
    page = admin_page(request, slug)
    # The queue holds jobs too, and its controls act on any request (names are unique
    # across both kinds).
    cluster = live_request(page, name, workload=None, noun="cluster")
    # One page shows two of these forms, each with a reason: ids per control keep every
    # label pointing at its own field.
    forms: dict[str, f.ReasonForm] = {
        "priority": f.PriorityForm(
            initial={"priority": cluster.priority}, auto_id="id_priority_%s"
        ),
        "hold": f.ReasonForm(auto_id="id_hold_%s"),
        "release": f.ReasonForm(auto_id="id_release_%s"),
        "suspend": f.ReasonForm(auto_id="id_suspend_%s"),
    }
    status = 200
    if request.method == "POST":
        if control not in CONTROLS:
            raise Http404(f"There is no {control!r} queue control.")
        form_class, call, done = CONTROLS[control]
        form = forms[control] = form_class(request.POST, auto_id=f"id_{control}_%s")
        if form.is_valid():
            result = run(request, form, lambda: call(request, cluster, form), done)
            if result is not None:
                return redirect("tenant-queue-page", slug=page.tenant.slug)
        status = 400
    return render(
        request,
        "frontend/tenant/manage.html",
        page.context(
            cluster=cluster,
            forms=forms,
            running=cluster.state in (State.ADMITTED, State.PROVISIONING, State.READY),
            range=controls.priority_range(),
        ),
        status=status,
    )
