"""The cohort tree: set a cohort's parent and description, remove its row (platform
admins only). One writer of the tree at a time, so it stays a tree."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, connection, transaction

from controlplane.exceptions import ServiceConflict
from tenants.audit import audit_record, audit_snapshot
from tenants.models import Cohort
from tenants.selectors import cohort_parents, cohort_path
from tenants.services.guards import require_platform_admin


def _cohort_cycle(name: str, parent: str) -> list[str] | None:
    """The loop that making ``parent`` the parent of ``name`` would close, as the names
    from ``name`` back to it, or ``None`` when the tree stays a tree."""
    above = cohort_path(parent, cohort_parents())
    if name not in above:
        return None
    return [name, *above[: above.index(name) + 1]]


# The key of the transaction lock that serialises changes to the cohort tree.
_COHORT_TREE_LOCK = 0x636F686F7274  # "cohort"


def _lock_cohort_tree() -> None:
    """One writer of the tree at a time (until the transaction ends), so that two
    changes that each keep it a tree cannot close a loop between them. SQLite (make run)
    has one writer anyway."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_COHORT_TREE_LOCK])


@transaction.atomic
def cohort_set(
    *, actor: Any, name: str, parent: str = "", description: str | None = None
) -> Cohort:
    """Create or change a cohort's row: its parent in the cohort tree and a description
    (platform admins only). Tenants of every cohort under one root borrow each other's
    unused quota from the next admission pass on; a parent that would close a loop is
    refused, naming the loop."""
    require_platform_admin(actor)
    _lock_cohort_tree()
    cohort = Cohort.objects.filter(name=name).first()
    created = cohort is None
    if cohort is None:
        cohort = Cohort(name=name)
    before = audit_snapshot(cohort, ["parent", "description"])
    cohort.parent = parent
    if description is not None:
        cohort.description = description
    cohort.full_clean(validate_unique=False)
    if parent:
        loop = _cohort_cycle(name, parent)
        if loop:
            raise ValidationError(
                {"parent": [f"{parent} is below {name} in the cohort tree: {' -> '.join(loop)}."]}
            )
    try:
        with transaction.atomic():
            cohort.save()
    except IntegrityError as exc:  # created concurrently since the lookup above
        raise ServiceConflict(f"Cohort {name} was created meanwhile; try again.") from exc
    after = audit_snapshot(cohort, ["parent", "description"])
    audit_record(
        actor=actor,
        action="cohort.create" if created else "cohort.update",
        obj=cohort,
        data=after if created else {"before": before, "after": after},
    )
    return cohort


@transaction.atomic
def cohort_delete(*, actor: Any, cohort: Cohort) -> None:
    """Remove a cohort's row (platform admins only): it becomes a root again and its
    tenants stop borrowing from the rest of its former tree. Cohorts below it keep
    naming it as their parent."""
    require_platform_admin(actor)
    audit_record(actor=actor, action="cohort.delete", obj=cohort, data={"name": cohort.name})
    cohort.delete()
