"""The platform's priority classes (docs/preemption.md): add, change and remove them
(platform admins only).

A class's ``name`` is fixed once created: it is also the name of the Kueue
WorkloadPriorityClass and the Kubernetes PriorityClass written for it, and the label on
its requests' objects. At most one class is the default; asking for a second is refused
naming the current one, so that the default never moves as a side effect.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, cast

from django.core.exceptions import ValidationError
from django.db import IntegrityError, models, transaction
from django.db.models import ForeignObjectRel

from controlplane.exceptions import ServiceConflict
from tenants.audit import audit_record, audit_snapshot
from tenants.models import PriorityClass, Tenant
from tenants.services.guards import require_platform_admin

# What a platform admin may change on a class, in the order the API shows it.
PRIORITY_CLASS_FACTS = (
    "value",
    "description",
    "may_preempt",
    "min_run_seconds",
    "checkpoint_grace_seconds",
    "notice_seconds",
    "is_default",
)
PRIORITY_CLASS_EDITABLE = frozenset((*PRIORITY_CLASS_FACTS, "tenants"))


def _snapshot(pc: PriorityClass) -> dict[str, Any]:
    return {
        **audit_snapshot(pc, ["name", *PRIORITY_CLASS_FACTS]),
        "tenants": sorted(t.slug for t in pc.tenants.all()) if pc.pk else [],
    }


def _tenants(slugs: Iterable[str]) -> list[Tenant]:
    """The tenants named by slug; any unknown slug is a 400 on ``tenants``."""
    slugs = list(dict.fromkeys(slugs))
    found = Tenant.objects.in_bulk(slugs, field_name="slug")
    unknown = [slug for slug in slugs if slug not in found]
    if unknown:
        raise ValidationError({"tenants": [f"No tenant {slug!r}." for slug in unknown]})
    return [found[slug] for slug in slugs]


def _check(pc: PriorityClass) -> None:
    """The class's own field rules, then the clashes with other classes, each in words
    that name the other class."""
    pc.full_clean(validate_unique=False, validate_constraints=False)
    others = PriorityClass.objects.exclude(pk=pc.pk)
    errors: dict[str, list[str]] = {}
    if others.filter(name=pc.name).exists():
        errors["name"] = [f"A priority class named {pc.name!r} already exists."]
    same = others.filter(value=pc.value).first()
    if same is not None:
        errors["value"] = [
            f"Priority class {same.name} already has value {pc.value}; each class needs "
            "its own value, so that the order of classes is total."
        ]
    if pc.is_default:
        current = others.filter(is_default=True).first()
        if current is not None:
            errors["is_default"] = [
                f"{current.name} is the default class; make it not the default first "
                "(there is at most one)."
            ]
    if errors:
        raise ValidationError(errors)


def _save(pc: PriorityClass) -> None:
    try:
        with transaction.atomic():
            pc.save()
    except IntegrityError as exc:  # a clash created concurrently since _check looked
        raise ServiceConflict(
            f"Another priority class took {pc.name!r}, value {pc.value} or the default "
            "meanwhile; try again."
        ) from exc


@transaction.atomic
def priority_class_create(
    *,
    actor: Any,
    name: str,
    value: int,
    description: str = "",
    may_preempt: bool = False,
    min_run_seconds: int = 0,
    checkpoint_grace_seconds: int = 0,
    notice_seconds: int | None = None,
    is_default: bool = False,
    tenants: Iterable[str] = (),
) -> PriorityClass:
    """Add a priority class (platform admins only); ``tenants`` are the slugs of the
    tenants that may pick it (none: every tenant)."""
    require_platform_admin(actor)
    pc = PriorityClass(
        name=name,
        value=value,
        description=description,
        may_preempt=may_preempt,
        min_run_seconds=min_run_seconds,
        checkpoint_grace_seconds=checkpoint_grace_seconds,
        notice_seconds=notice_seconds,
        is_default=is_default,
    )
    allowed = _tenants(tenants)
    _check(pc)
    _save(pc)
    pc.tenants.set(allowed)
    audit_record(actor=actor, action="priority_class.create", obj=pc, data=_snapshot(pc))
    return pc


@transaction.atomic
def priority_class_update(
    *, actor: Any, priority_class: PriorityClass, changes: Mapping[str, Any]
) -> PriorityClass:
    """Change a class (platform admins only): any of :data:`PRIORITY_CLASS_EDITABLE`,
    ``tenants`` as slugs. Its name cannot change (Kubernetes objects carry it). Requests
    already in the class keep it, even if their tenant is no longer allowed."""
    require_platform_admin(actor)
    pc = PriorityClass.objects.select_for_update().get(pk=priority_class.pk)
    if "name" in changes and changes["name"] != pc.name:
        raise ValidationError(
            {"name": ["A priority class's name cannot be changed: Kubernetes objects carry it."]}
        )
    unknown = sorted(set(changes) - PRIORITY_CLASS_EDITABLE - {"name"})
    if unknown:
        raise ValidationError({key: ["This field cannot be changed."] for key in unknown})
    before = _snapshot(pc)
    allowed = _tenants(changes["tenants"]) if "tenants" in changes else None
    for key in PRIORITY_CLASS_FACTS:
        if key in changes:
            setattr(pc, key, changes[key])
    _check(pc)
    _save(pc)
    if allowed is not None:
        pc.tenants.set(allowed)
    after = _snapshot(pc)
    audit_record(
        actor=actor,
        action="priority_class.update",
        obj=pc,
        data={"before": before, "after": after},
    )
    return pc


def _requests_in(pc: PriorityClass) -> tuple[int, Any]:
    """How many live requests are in the class, and the query of all requests that
    name it.

    The tenants app does not import the clusters app (the layers in .importlinter), so
    the rows that point at a class are found through the model's relations; a request's
    queryset says which are live (``live()``: not deleted, failed or finished)."""
    live, every = 0, []
    # Hidden ones included: the request's foreign key has no reverse accessor ("+").
    relations = PriorityClass._meta.get_fields(include_hidden=True)
    for relation in relations:
        if not (isinstance(relation, ForeignObjectRel) and relation.one_to_many):
            continue
        model = cast(type[models.Model], relation.related_model)
        rows = model._default_manager.filter(**{relation.field.name: pc})
        every.append((relation.field.name, rows))
        live += (rows.live() if hasattr(rows, "live") else rows).count()
    return live, every


@transaction.atomic
def priority_class_delete(*, actor: Any, priority_class: PriorityClass) -> None:
    """Remove a class no live request is in (platform admins only); one that live
    requests use is refused with their count (409). Finished requests that name it
    forget it (their class no longer matters to anything); the audit event says how
    many."""
    require_platform_admin(actor)
    pc = PriorityClass.objects.select_for_update().get(pk=priority_class.pk)
    live, every = _requests_in(pc)
    if live:
        raise ServiceConflict(
            f"Priority class {pc.name} is used by {live} live request(s); delete them, "
            "wait for them to finish, or keep the class (remove its tenants instead).",
            code="in_use",
        )
    forgotten = sum(rows.update(**{field: None}) for field, rows in every)
    audit_record(
        actor=actor,
        action="priority_class.delete",
        obj=pc,
        data={**_snapshot(pc), "finished_requests_forgotten": forgotten},
    )
    pc.delete()
