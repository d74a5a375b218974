"""The platform's priority classes page (docs/preemption.md): list, add, edit and
remove them, through the services the API calls. Platform admins only (a 404 for
anybody else)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.views.decorators.http import require_POST

from frontend.priority_class_forms import PriorityClassForm, initial_of
from frontend.views.common import form_page
from frontend.views.platform import pressed, require_platform_admin, submitted
from tenants import selectors, services
from tenants.models import PriorityClass
from tenants.services.priority_classes import PRIORITY_CLASS_FACTS


def _save(actor: Any, data: dict[str, Any]) -> PriorityClass:
    """Create the class, or change the one of that name."""
    tenants = [t.slug for t in data["tenants"]]
    facts = {key: data[key] for key in PRIORITY_CLASS_FACTS}
    facts["description"] = facts["description"] or ""
    facts["min_run_seconds"] = facts["min_run_seconds"] or 0
    facts["checkpoint_grace_seconds"] = facts["checkpoint_grace_seconds"] or 0
    existing = PriorityClass.objects.filter(name=data["name"]).first()
    if existing is None:
        return services.priority_class_create(
            actor=actor, name=data["name"], tenants=tenants, **facts
        )
    return services.priority_class_update(
        actor=actor, priority_class=existing, changes={**facts, "tenants": tenants}
    )


@login_required
def priority_classes(request: HttpRequest) -> HttpResponse:
    """Every class, highest first, with what it allows; the form adds a class or, opened
    from a row's "Edit", changes it."""
    require_platform_admin(request)
    name = request.GET.get("name", "")
    editing = PriorityClass.objects.filter(name=name).first() if name else None
    form = PriorityClassForm(request.POST or None, initial=initial_of(editing) if editing else {})
    saved = submitted(
        request,
        form,
        lambda data: _save(request.user, data),
        lambda data: f"Saved priority class {data['name']}.",
    )
    if saved is not None:
        return redirect("platform-priority-classes")
    return form_page(
        request,
        "frontend/platform/priority_classes.html",
        {"form": form, "classes": selectors.priority_class_list(), "editing": editing},
    )


@login_required
@require_POST
def priority_class_delete(request: HttpRequest, name: str) -> HttpResponse:
    """Remove a class no live request is in; one in use is refused, saying how many."""
    require_platform_admin(request)
    pc = get_object_or_404(PriorityClass, name=name)
    pressed(
        request,
        lambda: services.priority_class_delete(actor=request.user, priority_class=pc),
        f"Removed priority class {name}.",
    )
    return redirect("platform-priority-classes")
