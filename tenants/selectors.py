"""Reads about tenants, roles and the catalogue. Views, tasks and the dashboard call these."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import Case, Prefetch, Q, QuerySet, Value, When
from django.http import Http404
from django.shortcuts import get_object_or_404
from django.utils import timezone
from knox.models import AuthToken

from controlplane.rows import ModelRows
from tenants.models import (
    AuditEvent,
    Cohort,
    GpuFlavor,
    Membership,
    PriorityClass,
    Quota,
    Role,
    Tenant,
)
from tenants.ssh_keys import SshKey

# A token's public id: the start of knox's digest (a hash; the key itself is never kept).
TOKEN_ID = re.compile(r"[0-9a-f]{16}")


def is_platform_admin(user: Any) -> bool:
    """Platform admins are staff users: they manage users, the catalogue, tenants, quotas."""
    return bool(getattr(user, "is_authenticated", False) and user.is_staff)


def role_in_tenant(*, user: Any, tenant: Tenant) -> str | None:
    """The user's role in the tenant; platform admins act as tenant admins everywhere."""
    if is_platform_admin(user):
        return Role.ADMIN
    if not getattr(user, "is_authenticated", False):
        return None
    role = (
        Membership.objects.filter(tenant=tenant, user=user).values_list("role", flat=True).first()
    )
    return role


def tenant_with_role(*, user: Any, slug: str) -> tuple[Tenant, str | None] | None:
    """The tenant ``slug`` as ``user`` sees it and the user's role in it, in one query;
    ``None`` when the tenant does not exist or the user may not see it (a 404 alike).

    Every scoped API request needs both, so the role rides along instead of costing a
    second round trip; it reads exactly as :func:`role_in_tenant` would. A member's
    tenant is read through their membership (one join on a unique pair, where
    ``visible_to`` would add a DISTINCT and the role a subquery): a tenant the user is
    no member of is not found, which is what ``visible_to`` says of it.

    The query is written in SQL because every scoped request makes it, and building it
    through the ORM costs more than PostgreSQL's answer; the row is built as the ORM
    builds it (:mod:`controlplane.rows`).
    """
    found = tenant_role_and_flavor(user=user, slug=slug, flavor="")
    return None if found is None else found[:2]


def tenant_role_and_flavor(
    *, user: Any, slug: str, flavor: str
) -> tuple[Tenant, str | None, GpuFlavor | None] | None:
    """:func:`tenant_with_role`, and the catalogue's flavor named ``flavor`` (``None``
    when there is none) in the same query: a create names its flavor, and reading it
    with the tenant saves the create a round trip (:func:`flavor_named` reads the same)."""
    rows = ModelRows(Tenant, "t")
    tenants, memberships = Tenant._meta.db_table, Membership._meta.db_table
    flavors = ModelRows(GpuFlavor, "f")
    with_flavor = bool(flavor) and "\x00" not in flavor
    columns = f"{rows.columns}, %s" if is_platform_admin(user) else f"{rows.columns}, m.role"
    if with_flavor:
        columns += f", {flavors.columns}"
    join = f" LEFT JOIN {GpuFlavor._meta.db_table} f ON f.name = %s" if with_flavor else ""
    if is_platform_admin(user):
        sql = f"SELECT {columns} FROM {tenants} t{join} WHERE t.slug = %s"
        params: list[Any] = [Role.ADMIN, *([flavor] if with_flavor else []), slug]
    elif getattr(user, "is_authenticated", False):
        sql = (
            f"SELECT {columns} FROM {tenants} t "
            f"JOIN {memberships} m ON m.tenant_id = t.id{join} "
            "WHERE t.slug = %s AND m.user_id = %s"
        )
        params = [*([flavor] if with_flavor else []), slug, user.pk]
    else:
        return None
    if "\x00" in slug:
        return None  # no slug holds a NUL, and PostgreSQL refuses one in a query
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    if row is None:
        return None
    found = None
    if with_flavor and row[rows.width + 1] is not None:
        found = flavors.build(row, rows.width + 1)
    return rows.build(row), row[rows.width], found


def has_role(*, user: Any, tenant: Tenant, at_least: str) -> bool:
    """Whether the user holds ``at_least`` (or a stronger role) in the tenant."""
    role = role_in_tenant(user=user, tenant=tenant)
    return role is not None and Role.rank(role) >= Role.rank(at_least)


def role_may_grant(*, granter_role: str, role: str) -> bool:
    """A role may grant (or take away) only roles of equal or lower rank than its own."""
    return Role.rank(granter_role) >= Role.rank(role)


def user_list() -> QuerySet[Any]:
    """Every user account, for platform admins managing users."""
    return get_user_model().objects.order_by("username")


def user_with_memberships(*, user: Any) -> Any:
    """The user with their memberships and tenants loaded in one extra query."""
    return (
        get_user_model()
        .objects.prefetch_related(
            Prefetch(
                "memberships",
                queryset=Membership.objects.select_related("tenant").order_by("tenant__slug"),
            )
        )
        .get(pk=user.pk)
    )


def flavor_list() -> QuerySet[GpuFlavor]:
    """The GPU catalogue; readable by every authenticated user."""
    return GpuFlavor.objects.order_by("name")


def default_flavor_name(tenant: Tenant) -> str | None:
    """The flavor a new request's form starts on: the first (by name) on which the
    tenant holds nominal GPU quota, else the first it may borrow on; ``None`` when it has
    neither (the form then starts on the catalogue's first). A flavor just added to the
    catalogue has no quota yet, so it never becomes every tenant's default."""
    quotas = Quota.objects.for_tenant(tenant).filter(Q(gpus__gt=0) | Q(borrow_limit__gt=0))
    nominal_first = Case(When(gpus__gt=0, then=Value(0)), default=Value(1))
    return (
        quotas.order_by(nominal_first, "flavor__name")
        .values_list("flavor__name", flat=True)
        .first()
    )


def flavor_named(name: str) -> GpuFlavor | None:
    """The catalogue row named ``name``, or ``None``.

    Every create names its flavor, so this is one plain SQL statement
    (:mod:`controlplane.rows`) rather than a query the ORM compiles each time.
    """
    if "\x00" in name:
        return None  # no name holds a NUL, and PostgreSQL refuses one in a query
    flavors = ModelRows(GpuFlavor, "f")
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {flavors.columns} FROM {GpuFlavor._meta.db_table} f WHERE f.name = %s",
            [name],
        )
        row = cursor.fetchone()
    return flavors.build(row) if row is not None else None


def unknown_flavor_message(name: str) -> str:
    """Why ``name`` is no GPU flavor, naming the ones there are (API and dashboard alike)."""
    names = list(flavor_list().values_list("name", flat=True))
    shown = name if len(name) <= 40 else f"{name[:40]}..."
    if not names:
        return f"Unknown GPU type {shown!r}; the catalogue has no GPU types yet."
    return f"Unknown GPU type {shown!r}; choose one of: {', '.join(names)}."


def tenant_list(*, user: Any) -> QuerySet[Tenant]:
    """Tenants the user may see: their own, or all for platform admins."""
    return Tenant.objects.visible_to(user).order_by("slug")


def membership_list(*, tenant: Tenant) -> QuerySet[Membership]:
    """The tenant's members with their user accounts (one query for the page)."""
    return Membership.objects.for_tenant(tenant).select_related("user").order_by("user__username")


def quota_list(*, tenant: Tenant) -> QuerySet[Quota]:
    """The tenant's per-flavor GPU quotas with their flavors."""
    return Quota.objects.for_tenant(tenant).select_related("flavor").order_by("flavor__name")


def audit_list(*, user: Any) -> QuerySet[AuditEvent]:
    """Audit events the user may read (``AuditEvent.objects.visible_to``), newest first."""
    return AuditEvent.objects.visible_to(user).order_by("-at", "-id")


def flavor_references(*, flavor: GpuFlavor) -> tuple[int, int]:
    """How many quotas and cluster requests still point at the flavor."""
    return flavor.quotas.count(), flavor.clusters.count()


def token_list(*, user: Any) -> QuerySet[AuthToken]:
    """The user's API tokens that still work, newest first (expired ones are deleted by
    knox only when presented, so they are filtered out here)."""
    live = Q(expiry__isnull=True) | Q(expiry__gt=timezone.now())
    # Annotated because knox ships no types: its manager's queryset is Any to mypy.
    tokens: QuerySet[AuthToken] = AuthToken.objects.filter(live, user=user)
    return tokens.order_by("-created", "digest")


def token_get(*, user: Any, token_id: str) -> AuthToken:
    """One of the user's live tokens by its public id (the first 16 hex digits of its
    digest); another user's token, or an unknown id, is ``Http404``."""
    if not TOKEN_ID.fullmatch(token_id):
        raise Http404
    return get_object_or_404(token_list(user=user), digest__startswith=token_id)


def cohort_parents() -> dict[str, str]:
    """Each cohort that has a parent, by name: the tree as the admission pass reads it."""
    return dict(Cohort.objects.exclude(parent="").values_list("name", "parent"))


def cohort_list() -> QuerySet[Cohort]:
    """Every cohort with a row (a parent or a description), by name."""
    return Cohort.objects.all()


def cohort_path(name: str, parents: dict[str, str]) -> list[str]:
    """``name`` and its ancestors up to its root, stopping before a name seen twice."""
    # clusters.admission.cohort_root walks the same tree: neither layer may import the other.
    path = [name]
    while (parent := parents.get(path[-1])) and parent not in path:
        path.append(parent)
    return path


@dataclass(frozen=True)
class CohortNode:
    """One cohort as the API shows it: its parent (``None``: a root), the root whose pool
    its tenants borrow from, its description, and the tenants that name it."""

    name: str
    parent: str | None
    root: str
    description: str
    tenants: tuple[str, ...]
    defined: bool


def cohort_tree() -> list[CohortNode]:
    """Every cohort there is, by name: those with a row, those tenants name, and the
    parents rows name (two queries)."""
    rows = {c.name: c for c in Cohort.objects.all()}
    members: dict[str, list[str]] = {}
    for slug, cohort in Tenant.objects.unscoped().order_by("slug").values_list("slug", "cohort"):
        members.setdefault(cohort, []).append(slug)
    parents = {name: row.parent for name, row in rows.items() if row.parent}
    names = sorted({*rows, *members, *parents.values()})
    return [
        CohortNode(
            name=name,
            parent=parents.get(name),
            root=cohort_path(name, parents)[-1],
            description=rows[name].description if name in rows else "",
            tenants=tuple(members.get(name, ())),
            defined=name in rows,
        )
        for name in names
    ]


def cohort_node(name: str) -> CohortNode | None:
    """One cohort of :func:`cohort_tree` (``None``: no row, tenant or child names it)."""
    return next((node for node in cohort_tree() if node.name == name), None)


def ssh_key_list(*, user: Any) -> Any:
    """``user``'s own SSH public keys, oldest first."""
    return SshKey.objects.filter(user=user).order_by("created_at", "id")


def ssh_keys_for_cluster(*, tenant: Any, owner: Any) -> list[str]:
    """The public key lines a cluster with SSH accepts: its owner's and its tenant's
    admins' (the people who may open a tunnel to it), each key once."""
    admins = Membership.objects.filter(tenant=tenant, role=Role.ADMIN).values("user_id")
    keys = SshKey.objects.filter(Q(user=owner) | Q(user_id__in=admins))
    return sorted({k.public_key for k in keys.only("public_key")})


# Priority classes (docs/preemption.md). Every read works with no class at all (a fresh
# or flushed database): a request then has no class, value 0, and may not preempt.


def priority_class_list() -> QuerySet[PriorityClass]:
    """Every class, highest value first, with the tenants each allows."""
    return PriorityClass.objects.prefetch_related("tenants").order_by("-value")


def priority_classes_for(tenant: Tenant) -> QuerySet[PriorityClass]:
    """The classes ``tenant``'s members may pick: those that name no tenant (open to
    all) and those that name it, highest value first."""
    allowed = PriorityClass.objects.filter(tenants=tenant).values("pk")
    return (
        PriorityClass.objects.filter(Q(tenants__isnull=True) | Q(pk__in=allowed))
        .distinct()
        .prefetch_related("tenants")
        .order_by("-value")
    )


def default_priority_class() -> PriorityClass | None:
    """The class of a request that names none, or ``None`` if no class is the default."""
    return PriorityClass.objects.filter(is_default=True).first()


def may_use(priority_class: PriorityClass, tenant: Tenant) -> bool:
    """Whether ``tenant``'s members may pick ``priority_class``."""
    return priority_classes_for(tenant).filter(pk=priority_class.pk).exists()


def allowed_tenant_slugs(priority_class: PriorityClass) -> list[str]:
    """The slugs of the tenants the class names, sorted (empty: every tenant)."""
    return sorted(t.slug for t in priority_class.tenants.all())
