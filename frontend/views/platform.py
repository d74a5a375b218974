"""Platform administration pages: users, the GPU catalogue, the cohort tree, tenants
and their quotas.

Platform admins only; anybody else gets a 404, as for any page they may not see. Every
write calls the service the API calls (``tenants.services``, ``clusters.requests.
tenancy``), which checks, validates and audits it with the signed-in user; these views
translate the form and the outcome, nothing more.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.db.models import Count, Prefetch, Q, Sum
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from clusters.live.fleet import stock_by_member
from clusters.members.quota_caps import quota_cap_list
from clusters.queue.quota_preview import ProposedLine, quota_preview
from clusters.requests import tenancy
from controlplane.exceptions import ServiceConflict
from frontend import admin_forms as f
from frontend.kube_cluster_forms import QuotaCapForm, quota_cap_form
from frontend.views.common import HtmxHttpRequest, form_page
from tenants import selectors, services
from tenants.models import Cohort, GpuFlavor, Membership, Quota, Tenant
from tenants.services import passwords


def require_platform_admin(request: HttpRequest) -> None:
    """A 404 for anybody but a platform admin (the page does not exist for them)."""
    if not selectors.is_platform_admin(request.user):
        raise Http404("No such page.")


def run(request: HttpRequest, form: Any, call: Callable[[], Any], done: str) -> Any:
    """Call a service for a valid form: success adds ``done`` as a message and returns
    the service's result; a refusal puts its reason on the form (``None`` returned)."""
    try:
        result = call()
    except ValidationError as exc:
        f.attach_errors(form, exc)
        return None
    except ServiceConflict as exc:
        form.add_error(None, exc.message)
        return None
    messages.success(request, done)
    return result


def pressed(request: HttpRequest, call: Callable[[], Any], done: str) -> bool:
    """Call a service for a button, which has no form to carry errors: success says
    ``done``, a refusal (a conflict, or a value the service will not take) says why, both
    as messages. Whether it succeeded, for the caller to choose where to go."""
    try:
        call()
    except ServiceConflict as exc:
        messages.error(request, exc.message)
        return False
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
        return False
    messages.success(request, done)
    return True


def submitted(
    request: HttpRequest,
    form: Any,
    call: Callable[[dict[str, Any]], Any],
    done: str | Callable[[dict[str, Any]], str],
) -> Any:
    """A POST of a valid form: :func:`run` ``call`` on its cleaned data, saying ``done``
    (or ``done(data)``) on success. A GET, an invalid form or a refusal is ``None``, the
    form then carrying the errors."""
    if request.method != "POST" or not form.is_valid():
        return None
    data = form.cleaned_data
    return run(request, form, lambda: call(data), done(data) if callable(done) else done)


# --- Users --------------------------------------------------------------------------


@login_required
def users(request: HttpRequest) -> HttpResponse:
    """Every account with its tenants and roles; create one; deactivate or promote."""
    require_platform_admin(request)
    form = f.UserCreateForm(request.POST or None)
    created = submitted(
        request,
        form,
        lambda data: services.user_create(
            actor=request.user,
            username=data["username"],
            email=data["email"],
            password=data["password"],
            is_staff=data["is_staff"],
        ),
        lambda data: f"Created {data['username']}.",
    )
    if created is not None:
        return redirect("platform-users")
    accounts = selectors.user_list().prefetch_related(
        Prefetch(
            "memberships",
            queryset=Membership.objects.select_related("tenant").order_by("tenant__slug"),
        )
    )
    status = 400 if form.errors else 200
    return render(
        request, "frontend/platform/users.html", {"form": form, "accounts": accounts}, status=status
    )


USER_ACTIONS: dict[str, tuple[Callable[..., Any], dict[str, bool], str]] = {
    "deactivate": (services.user_set_active, {"active": False}, "deactivated"),
    "activate": (services.user_set_active, {"active": True}, "activated"),
    "make-admin": (services.user_set_platform_admin, {"admin": True}, "made a platform admin"),
    "remove-admin": (
        services.user_set_platform_admin,
        {"admin": False},
        "no longer a platform admin",
    ),
}


@login_required
@require_POST
def user_action(request: HttpRequest, user_id: int, action: str) -> HttpResponse:
    """Deactivate, activate, promote or demote one account."""
    require_platform_admin(request)
    if action not in USER_ACTIONS:
        raise Http404(f"There is no {action!r} action on a user.")
    user = get_object_or_404(get_user_model(), pk=user_id)
    service, kwargs, done = USER_ACTIONS[action]
    pressed(
        request,
        lambda: service(actor=request.user, user=user, **kwargs),
        f"{user.get_username()} {done}.",
    )
    return redirect("platform-users")


@login_required
@require_POST
def user_password(request: HttpRequest, user_id: int) -> HttpResponse:
    """Set a user's temporary password (they must change it at the next sign-in), or
    mail them a reset link ("send_reset_link" posted)."""
    require_platform_admin(request)
    user = get_object_or_404(get_user_model(), pk=user_id)
    name = user.get_username()
    try:
        if "send_reset_link" in request.POST:
            passwords.password_reset_link_send(
                actor=request.user,
                user=user,
                protocol=request.scheme or "http",
                domain=request.get_host(),
            )
            done = f"A reset link is mailed to {name} ({user.email})."
        else:
            # The validators word what is wrong with it, an empty one included.
            password = request.POST.get("temporary_password", "")
            passwords.password_set_temporary(actor=request.user, user=user, password=password)
            done = (
                f"{name} has a temporary password and must change it at the next sign-in; "
                "their sessions ended and their API tokens are revoked."
            )
    except ValidationError as exc:
        for message in exc.messages:
            messages.error(request, f"{name}: {message}")
    else:
        messages.success(request, done)
    return redirect("platform-users")


# --- The GPU catalogue -----------------------------------------------------------------


@login_required
def flavors(request: HttpRequest) -> HttpResponse:
    """The catalogue with its quotas and requests; add a flavor."""
    require_platform_admin(request)
    form = f.FlavorForm(request.POST or None)
    created = submitted(
        request,
        form,
        lambda data: services.flavor_create(actor=request.user, **data),
        lambda data: f"Added {data['name']} to the catalogue.",
    )
    if created is not None:
        return redirect("platform-flavors")
    catalogue = list(
        selectors.flavor_list().annotate(
            quota_gpus=Sum("quotas__gpus"), tenants=Count("quotas", distinct=True)
        )
    )
    # Each flavor's nodes per Kubernetes cluster; the flavor's own counts are their sums.
    stock = stock_by_member()
    for flavor in catalogue:
        flavor.members = stock.get(flavor.pk, [])  # type: ignore[attr-defined]
    return form_page(
        request,
        "frontend/platform/flavors.html",
        {"form": form, "catalogue": catalogue},
    )


@login_required
def flavor_edit(request: HttpRequest, name: str) -> HttpResponse:
    """Change a flavor's nodes, shape or sharing; remove it when nothing uses it."""
    require_platform_admin(request)
    flavor = get_object_or_404(GpuFlavor, name=name)
    form = f.FlavorForm(request.POST or None, instance=GpuFlavor.objects.get(pk=flavor.pk))
    saved = submitted(
        request,
        form,
        lambda data: services.flavor_update(
            actor=request.user,
            flavor=flavor,
            changes={k: v for k, v in data.items() if k != "name"},
        ),
        f"Saved {flavor.name}.",
    )
    if saved is not None:
        return redirect("platform-flavors")
    quotas, clusters = selectors.flavor_references(flavor=flavor)
    return form_page(
        request,
        "frontend/platform/flavor_edit.html",
        {"form": form, "flavor": flavor, "quotas": quotas, "clusters": clusters},
    )


@login_required
@require_POST
def flavor_delete(request: HttpRequest, name: str) -> HttpResponse:
    """Remove a flavor that no quota or request refers to."""
    require_platform_admin(request)
    flavor = get_object_or_404(GpuFlavor, name=name)
    if pressed(
        request,
        lambda: services.flavor_delete(actor=request.user, flavor=flavor),
        f"Removed {name} from the catalogue.",
    ):
        return redirect("platform-flavors")
    return redirect("platform-flavor", name=name)


# --- The cohort tree ------------------------------------------------------------------


def _cohort_initial(request: HttpRequest) -> dict[str, str]:
    """The form filled with the cohort a row's "Edit" link names (``?name=``), so that
    saving it keeps the description unless it is changed: the form sets all three."""
    name = request.GET.get("name", "")
    node = selectors.cohort_node(name) if name else None
    if node is None:
        return {}
    return {"name": node.name, "parent": node.parent or "", "description": node.description}


@login_required
def cohorts(request: HttpRequest) -> HttpResponse:
    """The cohort tree: every cohort with its parent, root and tenants; set a cohort's
    parent and description (the same service as ``PUT /api/v1/cohorts/{name}/``)."""
    require_platform_admin(request)
    form = f.CohortForm(request.POST or None, initial=_cohort_initial(request))
    saved = submitted(
        request,
        form,
        lambda data: services.cohort_set(
            actor=request.user,
            name=data["name"],
            parent=data["parent"],
            description=data["description"],
        ),
        lambda data: (
            f"Saved {data['name']}: "
            + (f"its parent is {data['parent']}." if data["parent"] else "it is a root.")
        ),
    )
    if saved is not None:
        return redirect("platform-cohorts")
    return form_page(
        request,
        "frontend/platform/cohorts.html",
        {"form": form, "tree": selectors.cohort_tree()},
    )


@login_required
@require_POST
def cohort_delete(request: HttpRequest, name: str) -> HttpResponse:
    """Remove a cohort's row: it becomes a root again (its children keep its name)."""
    require_platform_admin(request)
    cohort = get_object_or_404(Cohort, name=name)
    services.cohort_delete(actor=request.user, cohort=cohort)
    messages.success(request, f"Removed {name}'s row: it is a root again.")
    return redirect("platform-cohorts")


# --- Tenants --------------------------------------------------------------------------


@login_required
def tenants(request: HttpRequest) -> HttpResponse:
    """Every tenant with its members, quota and state; create one."""
    require_platform_admin(request)
    form = f.TenantCreateForm(request.POST or None)
    tenant = submitted(
        request,
        form,
        lambda data: services.tenant_create(
            actor=request.user,
            slug=data["slug"],
            name=data["name"],
            fields={"cohort": data["cohort"], "weight": data["weight"]},
        ),
        lambda data: f"Created {data['slug']}: give it a quota and an admin.",
    )
    if tenant is not None:
        return redirect("platform-tenant", slug=tenant.slug)
    rows = (
        Tenant.objects.unscoped()
        .annotate(
            members=Count("memberships", distinct=True),
            admins=Count("memberships", filter=Q(memberships__role="admin"), distinct=True),
        )
        .prefetch_related(
            Prefetch("quotas", queryset=Quota.objects.select_related("flavor").order_by("flavor"))
        )
        .order_by("archived_at", "slug")
    )
    return form_page(
        request,
        "frontend/platform/tenants.html",
        {"form": form, "rows": rows},
    )


def _quota_form(tenant: Tenant, data: Any = None) -> f.QuotaForm:
    catalogue = list(selectors.flavor_list())
    initial: dict[str, Any] = {"cpu": tenant.cpu_quota, "memory_gib": tenant.memory_quota_gib}
    for q in selectors.quota_list(tenant=tenant):
        initial[f"{q.flavor.name}-gpus"] = q.gpus
        initial[f"{q.flavor.name}-borrow"] = q.borrow_limit
        initial[f"{q.flavor.name}-lend"] = q.lend_limit
    return f.QuotaForm(data, initial=initial, flavors=catalogue)


def tenant_page(
    request: HttpRequest,
    tenant: Tenant,
    *,
    edit: f.TenantEditForm | None = None,
    quota: f.QuotaForm | None = None,
    cap: QuotaCapForm | None = None,
    status: int = 200,
) -> HttpResponse:
    """The platform's page of ``tenant``, with the forms given (their errors) or fresh."""
    edit = edit or f.TenantEditForm(instance=tenant)
    quota = quota or _quota_form(tenant)
    context = {
        "tenant_row": tenant,
        "edit": edit,
        "quota": quota,
        # Caps on its quota per Kubernetes cluster (frontend/views/quota_caps.py).
        "caps": quota_cap_list(tenant=tenant),
        "cap_form": cap or quota_cap_form(),
        "members": selectors.membership_list(tenant=tenant),
        "holdings": tenancy.tenant_holdings(tenant),
    }
    return render(request, "frontend/platform/tenant.html", context, status=status)


def platform_tenant(slug: str) -> Tenant:
    return get_object_or_404(Tenant.objects.unscoped(), slug=slug)


@login_required
def tenant(request: HttpRequest, slug: str) -> HttpResponse:
    """One tenant: its settings, its quota (with a live preview), members, archive."""
    require_platform_admin(request)
    row = platform_tenant(slug)
    if request.method != "POST":
        return tenant_page(request, row)
    edit = f.TenantEditForm(request.POST, instance=Tenant.objects.unscoped().get(pk=row.pk))
    saved = submitted(
        request,
        edit,
        lambda data: services.tenant_update(
            actor=request.user, tenant=row, changes={k: data[k] for k in edit.changed_data}
        ),
        f"Saved {row.slug}.",
    )
    if saved is not None:
        return redirect("platform-tenant", slug=row.slug)
    return tenant_page(request, platform_tenant(slug), edit=edit, status=400)


@login_required
@require_POST
def tenant_quota(request: HttpRequest, slug: str) -> HttpResponse:
    """Replace the tenant's quota (the same service as ``PUT .../quotas/``)."""
    require_platform_admin(request)
    row = platform_tenant(slug)
    form = _quota_form(row, request.POST)
    saved = submitted(
        request,
        form,
        lambda data: services.quota_set(
            actor=request.user,
            tenant=row,
            flavors=[services.QuotaLine(**line) for line in form.lines()],
            cpu=data["cpu"],
            memory_gib=data["memory_gib"],
        ),
        f"Saved the quota of {row.slug}.",
    )
    if saved is not None:
        return redirect("platform-tenant", slug=row.slug)
    return tenant_page(request, row, quota=form, status=400)


@login_required
@require_POST
def tenant_quota_preview(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    """What the quota in the form would do, before it is saved (htmx, as the form
    changes): totals against the fleet, requests it would admit, new borrowers."""
    require_platform_admin(request)
    row = platform_tenant(slug)
    form = _quota_form(row, request.POST)
    preview = None
    if form.is_valid():
        lines = [ProposedLine(**line) for line in form.lines()]
        preview = quota_preview(tenant=row, lines=lines)
    return render(
        request,
        "frontend/platform/partials/quota_preview.html",
        {"preview": preview, "quota": form, "tenant_row": row},
    )


@login_required
@require_POST
def tenant_archive(request: HttpRequest, slug: str, action: str) -> HttpResponse:
    """Archive a tenant that holds nothing, or restore an archived one."""
    require_platform_admin(request)
    row = platform_tenant(slug)
    if action not in ("archive", "restore"):
        raise Http404(f"There is no {action!r} action on a tenant.")
    service = tenancy.tenant_archive if action == "archive" else tenancy.tenant_restore
    pressed(request, lambda: service(actor=request.user, tenant=row), f"{row.slug} {action}d.")
    return redirect("platform-tenant", slug=row.slug)
