"""The fleet's Kubernetes clusters in the dashboard (platform admins only; a 404 for
anybody else): the list with each one's health, the register form, and a cluster's page
with its health, its flavors' nodes, its drain's progress and the cordon, drain, check
and remove buttons. Every
write is the service the API calls (:mod:`clusters.members.services`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from clusters.members import selectors, services
from clusters.members.quota_caps import quota_cap_list
from clusters.members.stock import stock_set
from clusters.models import DrainMode, KubeCluster, Schedulable
from controlplane.exceptions import ServiceConflict
from frontend.kube_cluster_forms import KubeClusterForm, StockForm, stock_form
from frontend.views.common import form_page
from frontend.views.platform import pressed, require_platform_admin, submitted
from tenants.models import GpuFlavor


@login_required
def kube_clusters(request: HttpRequest) -> HttpResponse:
    """Every member in placement order with its health; register one (its credentials
    are checked before it is saved: a refusal stays on the form, saying what failed)."""
    require_platform_admin(request)
    form = KubeClusterForm(request.POST or None)
    registered = submitted(
        request,
        form,
        lambda data: services.kube_cluster_register(actor=request.user, **data),
        lambda data: f"Registered {data['name']}.",
    )
    if registered is not None:
        return redirect("platform-kube-cluster", name=registered.name)
    return form_page(
        request,
        "frontend/platform/kube_clusters.html",
        {"form": form, "members": selectors.kube_cluster_list()},
    )


@login_required
def kube_cluster(
    request: HttpRequest, name: str, form: StockForm | None = None, status: int = 200
) -> HttpResponse:
    """One member: its health, sign-in, placement, each flavor's nodes there (with the
    form that lists them) and the caps on tenants' quotas there."""
    require_platform_admin(request)
    member = get_object_or_404(selectors.kube_cluster_list(), name=name)
    placed, waiting = selectors.kube_cluster_references(member=member)
    return render(
        request,
        "frontend/platform/kube_cluster.html",
        {
            "member": member,
            "stock": selectors.kube_cluster_stock(member=member),
            "stock_form": form or stock_form(),
            "caps": quota_cap_list().filter(kube_cluster=member),
            "placed": placed,
            "waiting": waiting,
            "drain": selectors.drain_progress([member]).get(member.pk),
        },
        status=status,
    )


@login_required
@require_POST
def kube_cluster_stock(request: HttpRequest, name: str) -> HttpResponse:
    """List a flavor's nodes in one member (the flavor's totals follow)."""
    require_platform_admin(request)
    member = get_object_or_404(KubeCluster, name=name)
    form = stock_form(request.POST)

    def save(data: dict[str, Any]) -> Any:
        flavor = get_object_or_404(GpuFlavor, name=data["flavor"])
        stock_set(
            actor=request.user,
            member=member,
            flavor=flavor,
            node_count=data["node_count"],
            max_node_count=data["max_node_count"],
        )
        return True

    saved = submitted(request, form, save, lambda data: f"Saved {data['flavor']} on {name}.")
    if saved is not None:
        return redirect("platform-kube-cluster", name=name)
    return kube_cluster(request, name, form=form, status=400)


def _cordon(request: HttpRequest, member: KubeCluster) -> str:
    services.kube_cluster_set_schedulable(
        actor=request.user, member=member, schedulable=Schedulable.CORDONED
    )
    return f"{member.name} is cordoned: nothing new is placed there."


def _uncordon(request: HttpRequest, member: KubeCluster) -> str:
    services.kube_cluster_set_schedulable(
        actor=request.user, member=member, schedulable=Schedulable.ACTIVE
    )
    return f"{member.name} takes new placements again."


def _drain(request: HttpRequest, member: KubeCluster, mode: str = DrainMode.DEFAULT) -> str:
    services.kube_cluster_drain(actor=request.user, member=member, mode=mode)
    return f"{member.name} is draining: nothing new is placed there, and what runs is moved."


def _drain_all(request: HttpRequest, member: KubeCluster) -> str:
    return _drain(request, member, DrainMode.REQUEUE)


def _check(request: HttpRequest, member: KubeCluster) -> str:
    report = services.kube_cluster_check(actor=request.user, member=member)
    if not report.passed:
        raise ServiceConflict(report.message)
    return f"{member.name} passes the check."


ACTIONS: dict[str, Callable[[HttpRequest, KubeCluster], str]] = {
    "cordon": _cordon,
    "uncordon": _uncordon,
    "drain": _drain,
    "drain-requeue": _drain_all,
    "check": _check,
}


@login_required
@require_POST
def kube_cluster_action(request: HttpRequest, name: str, action: str) -> HttpResponse:
    """Cordon, uncordon, drain, check or remove one member; back to its page (or the
    list)."""
    require_platform_admin(request)
    member = get_object_or_404(KubeCluster, name=name)
    if action == "remove":
        if pressed(
            request,
            lambda: services.kube_cluster_remove(actor=request.user, member=member),
            f"Removed {name} from the fleet.",
        ):
            return redirect("platform-kube-clusters")
        return redirect("platform-kube-cluster", name=name)
    if action not in ACTIONS:
        raise Http404(f"There is no {action!r} action on a Kubernetes cluster.")
    try:
        messages.success(request, ACTIONS[action](request, member))
    except ServiceConflict as exc:
        messages.error(request, exc.message)
    return redirect("platform-kube-cluster", name=name)
