"""Writes about users, tokens, the catalogue, tenants, members and quotas (STYLE 4, 5).

Every service is keyword-only, runs in one transaction and records exactly one audit
event inside it, so a change and its audit row commit or roll back together. Services
enforce the access rules themselves (not only the API views), because the dashboard
and tasks call them directly. Invalid input raises Django's ``ValidationError`` with a
field dict, a forbidden action ``PermissionDenied`` and a clash with current state
:class:`~controlplane.exceptions.ServiceConflict` (code ``conflict``, as the API has
always answered these); the API's error handler turns each into the single error format.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, connection, transaction
from django.db.models import ProtectedError
from knox.models import AuthToken

from controlplane.exceptions import ServiceConflict
from tenants.audit import audit_record
from tenants.models import (
    Cohort,
    GpuFlavor,
    Membership,
    MembershipSource,
    Quota,
    Role,
    Tenant,
    tenant_namespace,
)
from tenants.selectors import (
    cohort_parents,
    cohort_path,
    flavor_references,
    is_platform_admin,
    role_in_tenant,
    role_may_grant,
    unknown_flavor_message,
)

if TYPE_CHECKING:
    # For annotations only: tenants.lockout imports this module (it audits failed sign-ins
    # through sign_in_failure_record), so a runtime import here would be a cycle.
    from tenants.lockout import Lockout

POLICY_FIELDS = (
    "max_dev_clusters_per_user",
    "max_dev_gpus_per_user",
    "dev_ttl_hours",
    "max_ttl_hours",
    "idle_suspend_minutes",
    "idle_suspend_prod",
    "monthly_gpu_hour_budget",
    "allow_pip_direct_urls",
)
TENANT_EDITABLE = frozenset(
    {
        "name",
        "cohort",
        "weight",
        "cpu_quota",
        "memory_quota_gib",
        "pod_security",
        "monthly_gpu_hour_budget",
        *POLICY_FIELDS,
    }
)
TENANT_IMMUTABLE = ("slug", "namespace")
FLAVOR_EDITABLE = frozenset(
    {
        "gpu_product",
        "gpus_per_node",
        "cpu_per_node",
        "memory_per_node_gib",
        "node_count",
        "max_node_count",
        "sharing",
    }
)
# The least role that may add and remove members of a tenant.
MANAGE_MEMBERS_ROLE = Role.ADMIN


@dataclass(frozen=True)
class QuotaLine:
    """One flavor's line in a tenant's quota: nominal GPUs, how many it may borrow, and
    how many of its unused nominal GPUs it lends (``None``: all)."""

    flavor: str
    gpus: int
    borrow_limit: int = 0
    lend_limit: int | None = None


def _require_platform_admin(actor: Any) -> None:
    if not is_platform_admin(actor):
        raise PermissionDenied("Only platform admins may do this.")


def _jsonable(value: Any) -> Any:
    # Audit data is JSON; decimals (the tenant weight) are kept exact as strings.
    return str(value) if isinstance(value, Decimal) else value


def _snapshot(obj: Any, fields: Sequence[str]) -> dict[str, Any]:
    return {name: _jsonable(getattr(obj, name)) for name in fields}


# --- Users and tokens ---------------------------------------------------------------


@transaction.atomic
def user_create(
    *, actor: Any, username: str, email: str, password: str, is_staff: bool = False
) -> Any:
    """Create a user account (platform admins only); the password must pass Django's
    validators and is stored hashed; the audit event never contains it."""
    _require_platform_admin(actor)
    user_model = get_user_model()
    user = user_model(username=username, email=email, is_staff=is_staff)
    errors: dict[str, list[str]] = {}
    if user_model.objects.filter(username__iexact=username).exists():
        errors["username"] = ["A user with this username already exists."]
    try:
        validate_password(password, user=user)
    except ValidationError as exc:
        errors["password"] = list(exc.messages)
    if errors:
        raise ValidationError(errors)
    user.set_password(password)
    user.full_clean(exclude=["password"])
    user.save()
    audit_record(
        actor=actor,
        action="user.create",
        obj=user,
        data={"username": username, "email": email, "is_staff": is_staff},
    )
    return user


def _platform_admins_left(*, without: Any) -> int:
    return (
        get_user_model()
        .objects.filter(is_staff=True, is_active=True)
        .exclude(pk=without.pk)
        .count()
    )


@transaction.atomic
def user_set_active(*, actor: Any, user: Any, active: bool) -> Any:
    """Deactivate a user (they can no longer sign in, and their API tokens and sessions
    end at once) or activate them again (platform admins only). Nobody deactivates
    themselves, and the last active platform admin stays."""
    _require_platform_admin(actor)
    user = get_user_model().objects.select_for_update().get(pk=user.pk)
    if user.is_active == active:
        return user
    if not active:
        if user.pk == actor.pk:
            raise ServiceConflict("You cannot deactivate yourself.", code="self")
        if user.is_staff and not _platform_admins_left(without=user):
            raise ServiceConflict(
                f"{user.get_username()} is the last active platform admin.", code="last_admin"
            )
    user.is_active = active
    user.save(update_fields=["is_active"])
    revoked = 0
    if not active:
        # Sessions need no sweep: the authentication backend (a ModelBackend) refuses an
        # inactive user on every request, so their sessions end at the next one.
        revoked = AuthToken.objects.filter(user=user).delete()[0]
    audit_record(
        actor=actor,
        action="user.activate" if active else "user.deactivate",
        obj=user,
        data={"username": user.get_username(), "tokens_revoked": revoked},
    )
    return user


@transaction.atomic
def user_set_platform_admin(*, actor: Any, user: Any, admin: bool) -> Any:
    """Make a user a platform admin or take it away (platform admins only); the last
    active platform admin cannot be taken away, nor can you demote yourself."""
    _require_platform_admin(actor)
    user = get_user_model().objects.select_for_update().get(pk=user.pk)
    if user.is_staff == admin:
        return user
    if not admin:
        if user.pk == actor.pk:
            raise ServiceConflict("You cannot demote yourself; ask another admin.", code="self")
        if not _platform_admins_left(without=user):
            raise ServiceConflict(
                f"{user.get_username()} is the last active platform admin.", code="last_admin"
            )
    user.is_staff = admin
    user.save(update_fields=["is_staff"])
    audit_record(
        actor=actor,
        action="user.platform_admin" if admin else "user.platform_admin_removed",
        obj=user,
        data={"username": user.get_username(), "is_staff": admin},
    )
    return user


@transaction.atomic
def token_issue(*, user: Any) -> tuple[AuthToken, str]:
    """Issue an API token for an authenticated user; returns the row and the key.

    Only a hash of the key is stored (knox), so the key is shown once, here.
    """
    instance, key = AuthToken.objects.create(user=user)
    audit_record(
        actor=user,
        action="token.create",
        object_type="authtoken",
        object_id=instance.digest[:16],
        object_repr=f"token of {user.get_username()}",
        data={"expiry": instance.expiry.isoformat() if instance.expiry else None},
    )
    return instance, key


@transaction.atomic
def token_revoke(*, token: AuthToken) -> None:
    """Revoke (delete) one API token; requests bearing it are refused from now on."""
    user = token.user
    audit_record(
        actor=user,
        action="token.revoke",
        object_type="authtoken",
        object_id=token.digest[:16],
        object_repr=f"token of {user.get_username()}",
    )
    token.delete()


@transaction.atomic
def token_revoke_all(*, user: Any) -> int:
    """Revoke every API token of ``user`` (a leaked key whose id is unknown, a lost
    laptop); returns how many. One audit event names them all."""
    tokens = AuthToken.objects.filter(user=user)
    ids = sorted(digest[:16] for digest in tokens.values_list("digest", flat=True))
    audit_record(
        actor=user,
        action="token.revoke_all",
        object_type="user",
        object_id=str(user.pk),
        object_repr=f"tokens of {user.get_username()}",
        data={"count": len(ids), "tokens": ids},
    )
    tokens.delete()
    return len(ids)


@transaction.atomic
def sign_in_failure_record(
    *, username: str, address: str, path: str, lockouts: Sequence[Lockout] = ()
) -> None:
    """Audit a failed password check: the username tried, the client's address and the
    path, never the password; and each lockout the failure started. Platform admins
    read these (no tenant); the lockout bounds how many one client can cause."""
    audit_record(
        actor=None,
        actor_name="anonymous",
        action="sign_in.failed",
        object_type="user",
        object_id=username[:128],
        object_repr=username[:200],
        data={"username": username[:150], "address": address, "path": path[:200]},
    )
    for lock in lockouts:
        audit_record(
            actor=None,
            actor_name="anonymous",
            action="sign_in.lockout",
            object_type=lock.scope,
            object_id=(username if lock.scope == "user" else address)[:128],
            object_repr=(username if lock.scope == "user" else address)[:200],
            data={
                "scope": lock.scope,
                "seconds": lock.seconds,
                "username": username[:150],
                "address": address,
            },
        )


# --- The GPU catalogue --------------------------------------------------------------


@transaction.atomic
def flavor_create(
    *,
    actor: Any,
    name: str,
    gpu_product: str,
    gpus_per_node: int,
    cpu_per_node: int,
    memory_per_node_gib: int,
    node_count: int = 0,
    max_node_count: int | None = None,
    sharing: bool = False,
) -> GpuFlavor:
    """Add a GPU flavor to the catalogue (platform admins only)."""
    _require_platform_admin(actor)
    flavor = GpuFlavor(
        name=name,
        gpu_product=gpu_product,
        gpus_per_node=gpus_per_node,
        cpu_per_node=cpu_per_node,
        memory_per_node_gib=memory_per_node_gib,
        node_count=node_count,
        max_node_count=max_node_count,
        sharing=sharing,
    )
    flavor.full_clean()
    try:
        with transaction.atomic():
            flavor.save()
    except IntegrityError as exc:  # created concurrently since full_clean looked
        raise ValidationError({"name": [f"A flavor named {name!r} already exists."]}) from exc
    audit_record(
        actor=actor,
        action="flavor.create",
        obj=flavor,
        data=_snapshot(flavor, ["name", *sorted(FLAVOR_EDITABLE)]),
    )
    return flavor


@transaction.atomic
def flavor_update(*, actor: Any, flavor: GpuFlavor, changes: Mapping[str, Any]) -> GpuFlavor:
    """Change a flavor's node facts (platform admins only); its name is immutable
    because quotas, clusters and Kubernetes labels refer to it."""
    _require_platform_admin(actor)
    if "name" in changes and changes["name"] != flavor.name:
        raise ValidationError({"name": ["A flavor's name cannot be changed."]})
    unknown = sorted(set(changes) - FLAVOR_EDITABLE - {"name"})
    if unknown:
        raise ValidationError({key: ["This field cannot be changed."] for key in unknown})
    fields = sorted(set(changes) & FLAVOR_EDITABLE)
    before = _snapshot(flavor, fields)
    for name in fields:
        setattr(flavor, name, changes[name])
    flavor.full_clean()
    flavor.save(update_fields=fields or None)
    audit_record(
        actor=actor,
        action="flavor.update",
        obj=flavor,
        data={"before": before, "after": _snapshot(flavor, fields)},
    )
    return flavor


@transaction.atomic
def flavor_delete(*, actor: Any, flavor: GpuFlavor) -> None:
    """Remove a flavor nobody uses (platform admins only); a flavor still named by a
    quota or a cluster request is a conflict, since deleting it would orphan them."""
    _require_platform_admin(actor)
    flavor = GpuFlavor.objects.select_for_update().get(pk=flavor.pk)
    quotas, clusters = flavor_references(flavor=flavor)
    if quotas or clusters:
        raise ServiceConflict(
            f"Flavor {flavor.name} is still used by {quotas} quota(s) and {clusters} "
            "cluster request(s); remove those first."
        )
    audit_record(actor=actor, action="flavor.delete", obj=flavor, data={"name": flavor.name})
    try:
        flavor.delete()
    except ProtectedError as exc:  # a reference created since the check above
        raise ServiceConflict(f"Flavor {flavor.name} is still in use.") from exc


# --- Cohorts ------------------------------------------------------------------------


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
    _require_platform_admin(actor)
    _lock_cohort_tree()
    cohort = Cohort.objects.filter(name=name).first()
    created = cohort is None
    if cohort is None:
        cohort = Cohort(name=name)
    before = _snapshot(cohort, ["parent", "description"])
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
    after = _snapshot(cohort, ["parent", "description"])
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
    _require_platform_admin(actor)
    audit_record(actor=actor, action="cohort.delete", obj=cohort, data={"name": cohort.name})
    cohort.delete()


# --- Tenants ------------------------------------------------------------------------


_TENANT_SNAPSHOT = ["slug", "namespace", *sorted(TENANT_EDITABLE)]


@transaction.atomic
def tenant_create(
    *,
    actor: Any,
    slug: str,
    name: str,
    namespace: str = "",
    fields: Mapping[str, Any] | None = None,
) -> Tenant:
    """Create a tenant (platform admins only); ``fields`` may set the cohort, weight, CPU
    and memory quotas and the policy fields.

    The namespace is always the configured prefix plus the slug: ``namespace`` may be
    left out or repeat that name, and anything else (``kube-system``, ``default``, the
    control plane's namespace, any other name) is refused (``tenant_namespace_problem``).
    A derived name that is itself reserved is reported on the slug, the field at fault.
    """
    _require_platform_admin(actor)
    fields = dict(fields or {})
    unknown = sorted(set(fields) - TENANT_EDITABLE)
    if unknown:
        raise ValidationError({key: ["This field cannot be set."] for key in unknown})
    tenant = Tenant(slug=slug, name=name, namespace=namespace or tenant_namespace(slug), **fields)
    try:
        _tenant_clean(tenant)
    except ValidationError as exc:
        errors = exc.message_dict
        if not namespace and "namespace" in errors:
            errors.setdefault("slug", []).extend(errors.pop("namespace"))
        raise ValidationError(errors) from exc
    try:
        with transaction.atomic():
            tenant.save()
    except IntegrityError as exc:  # created concurrently since the checks above
        raise ValidationError(
            {"slug": [f"A tenant with slug {slug!r} or namespace {tenant.namespace!r} exists."]}
        ) from exc
    audit_record(
        actor=actor,
        action="tenant.create",
        obj=tenant,
        tenant=tenant,
        data=_snapshot(tenant, _TENANT_SNAPSHOT),
    )
    return tenant


@transaction.atomic
def tenant_update(*, actor: Any, tenant: Tenant, changes: Mapping[str, Any]) -> Tenant:
    """Change a tenant's name, cohort, weight, CPU/memory quotas or policy (platform
    admins only). Slug and namespace are immutable: Kubernetes objects live under them."""
    _require_platform_admin(actor)
    errors = {
        key: [f"The {key} cannot be changed after creation."]
        for key in TENANT_IMMUTABLE
        if key in changes and changes[key] != getattr(tenant, key)
    }
    for key in sorted(set(changes) - TENANT_EDITABLE - set(TENANT_IMMUTABLE)):
        errors[key] = ["This field cannot be changed."]
    if errors:
        raise ValidationError(errors)
    tenant = Tenant.objects.select_for_update().get(pk=tenant.pk)
    fields = sorted(set(changes) & TENANT_EDITABLE)
    before = _snapshot(tenant, fields)
    for name in fields:
        setattr(tenant, name, changes[name])
    _tenant_clean(tenant)
    tenant.save(update_fields=fields or None)
    audit_record(
        actor=actor,
        action="tenant.update",
        obj=tenant,
        tenant=tenant,
        data={"before": before, "after": _snapshot(tenant, fields)},
    )
    _ensure_visible(actor=actor, tenant=tenant)
    return tenant


# What a tenant's own admins may change: how their engineers share the tenant. The
# platform keeps the rest (quotas, weight, cohort, the maximum TTL, pod security).
TENANT_ADMIN_POLICY = frozenset(
    {
        "max_dev_clusters_per_user",
        "max_dev_gpus_per_user",
        "dev_ttl_hours",
        "idle_suspend_minutes",
        "idle_suspend_prod",
        "allow_pip_direct_urls",
    }
)


@transaction.atomic
def tenant_policy_update(*, actor: Any, tenant: Tenant, changes: Mapping[str, Any]) -> Tenant:
    """A tenant admin's change to their tenant's policy, within what the platform
    allows: the per-engineer caps, the default dev TTL (at most the platform's maximum
    TTL for the tenant), the idle policy and whether jobs' pip packages may be direct
    URLs. Platform admins may change these too."""
    role = role_in_tenant(user=actor, tenant=tenant)
    if role != Role.ADMIN:
        raise PermissionDenied("Only the tenant's admins may change its policy.")
    errors = {
        key: ["Only a platform admin may change this."]
        for key in sorted(set(changes) - TENANT_ADMIN_POLICY)
    }
    if errors:
        raise ValidationError(errors)
    tenant = Tenant.objects.select_for_update().get(pk=tenant.pk)
    fields = sorted(changes)
    before = _snapshot(tenant, fields)
    for name in fields:
        setattr(tenant, name, changes[name])
    if tenant.dev_ttl_hours > tenant.max_ttl_hours:
        raise ValidationError(
            {
                "dev_ttl_hours": [
                    f"At most {tenant.max_ttl_hours} hours: the maximum TTL the platform "
                    f"allows {tenant.slug}."
                ]
            }
        )
    tenant.full_clean()
    tenant.save(update_fields=fields or None)
    audit_record(
        actor=actor,
        action="tenant.policy",
        obj=tenant,
        tenant=tenant,
        data={"before": before, "after": _snapshot(tenant, fields)},
    )
    return tenant


def _tenant_clean(tenant: Tenant) -> None:
    # The database constraint says the same; checking first names the field at fault.
    if tenant.dev_ttl_hours > tenant.max_ttl_hours:
        raise ValidationError(
            {"dev_ttl_hours": ["The default dev TTL cannot exceed the maximum TTL."]}
        )
    if tenant.monthly_gpu_hour_budget == 0:
        # Zero would put every request over budget; no budget is the empty value.
        raise ValidationError(
            {
                "monthly_gpu_hour_budget": [
                    "A budget is at least 1 GPU-hour; leave it empty for none."
                ]
            }
        )
    tenant.full_clean()


def _ensure_visible(*, actor: Any, tenant: Tenant) -> None:
    # After a write, the actor must still see what they changed (STYLE 3): a write that
    # would land outside the actor's scope is refused and rolled back with the rest.
    if not Tenant.objects.visible_to(actor).filter(pk=tenant.pk).exists():
        raise PermissionDenied("The change would leave the object outside your tenants.")


# --- Members ------------------------------------------------------------------------


def _refuse_provider_managed(membership: Membership) -> None:
    if membership.source == MembershipSource.PROVIDER:
        raise ServiceConflict(
            f"{membership.user.get_username()}'s role in {membership.tenant.slug} comes from "
            "the identity provider's groups; change it there.",
            code="managed_by_provider",
        )


def _require_member_manager(*, actor: Any, tenant: Tenant) -> str:
    role = role_in_tenant(user=actor, tenant=tenant)
    if role is None or Role.rank(role) < Role.rank(MANAGE_MEMBERS_ROLE):
        raise PermissionDenied("Only tenant admins may manage members.")
    return role


@transaction.atomic
def membership_add(*, actor: Any, tenant: Tenant, username: str, role: str) -> Membership:
    """Give an existing user a role in the tenant (tenant admins and platform admins).

    An actor may grant only roles up to their own rank. Unknown users and existing
    members are input errors, reported on ``username``.
    """
    actor_role = _require_member_manager(actor=actor, tenant=tenant)
    if role not in Role.values:
        raise ValidationError({"role": [f"Unknown role {role!r}."]})
    if not role_may_grant(granter_role=actor_role, role=role):
        raise PermissionDenied("You cannot grant a role above your own.")
    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        raise ValidationError({"username": [f"No user named {username!r}."]})
    duplicate = ValidationError({"username": [f"{username} is already a member of {tenant.slug}."]})
    if Membership.objects.filter(tenant=tenant, user=user).exists():
        raise duplicate
    try:
        with transaction.atomic():
            membership = Membership.objects.create(tenant=tenant, user=user, role=role)
    except IntegrityError as exc:  # added concurrently since the check above
        raise duplicate from exc
    audit_record(
        actor=actor,
        action="membership.add",
        obj=membership,
        tenant=tenant,
        data={"username": username, "role": role},
    )
    _ensure_visible(actor=actor, tenant=tenant)
    return membership


@transaction.atomic
def membership_set_role(*, actor: Any, membership: Membership, role: str) -> Membership:
    """Change a member's role (tenant admins and platform admins): never to or from a
    role above the actor's own, and never the tenant's last admin away from admin."""
    tenant = Tenant.objects.select_for_update().get(pk=membership.tenant_id)
    actor_role = _require_member_manager(actor=actor, tenant=tenant)
    if role not in Role.values:
        raise ValidationError({"role": [f"Unknown role {role!r}."]})
    membership = Membership.objects.select_related("user", "tenant").get(pk=membership.pk)
    _refuse_provider_managed(membership)
    if not (
        role_may_grant(granter_role=actor_role, role=role)
        and role_may_grant(granter_role=actor_role, role=membership.role)
    ):
        raise PermissionDenied("You cannot grant or change a role above your own.")
    if membership.role == role:
        return membership
    if membership.role == Role.ADMIN:
        admins = Membership.objects.filter(tenant=tenant, role=Role.ADMIN).count()
        if admins <= 1:
            raise ServiceConflict(
                f"{membership.user.get_username()} is the last admin of {tenant.slug}; "
                "make another member admin first.",
                code="last_admin",
            )
    before = membership.role
    membership.role = role
    membership.save(update_fields=["role"])
    audit_record(
        actor=actor,
        action="membership.role",
        obj=membership,
        tenant=tenant,
        data={"username": membership.user.get_username(), "before": before, "after": role},
    )
    return membership


@transaction.atomic
def membership_remove(*, actor: Any, membership: Membership) -> None:
    """Take a user out of a tenant (tenant admins and platform admins).

    Nobody may remove a member who outranks them, and the last admin of a tenant
    cannot be removed (a conflict): somebody must always be able to manage members.
    """
    # Lock the tenant row so that two admins removing each other cannot both succeed.
    tenant = Tenant.objects.select_for_update().get(pk=membership.tenant_id)
    actor_role = _require_member_manager(actor=actor, tenant=tenant)
    if not role_may_grant(granter_role=actor_role, role=membership.role):
        raise PermissionDenied("You cannot remove a member whose role is above your own.")
    _refuse_provider_managed(membership)
    if membership.role == Role.ADMIN:
        admins = Membership.objects.filter(tenant=tenant, role=Role.ADMIN).count()
        if admins <= 1:
            raise ServiceConflict(
                f"{membership.user.get_username()} is the last admin of {tenant.slug}; "
                "add another admin first."
            )
    audit_record(
        actor=actor,
        action="membership.remove",
        obj=membership,
        tenant=tenant,
        data={"username": membership.user.get_username(), "role": membership.role},
    )
    membership.delete()


# --- Quotas -------------------------------------------------------------------------


def _quota_state(tenant: Tenant) -> dict[str, Any]:
    lines = Quota.objects.for_tenant(tenant).select_related("flavor").order_by("flavor__name")
    return {
        "flavors": [
            {
                "flavor": q.flavor.name,
                "gpus": q.gpus,
                "borrow_limit": q.borrow_limit,
                "lend_limit": q.lend_limit,
            }
            for q in lines
        ],
        "cpu": tenant.cpu_quota,
        "memory_gib": tenant.memory_quota_gib,
    }


@transaction.atomic
def quota_set(
    *, actor: Any, tenant: Tenant, flavors: Sequence[QuotaLine], cpu: int, memory_gib: int
) -> Tenant:
    """Replace the tenant's whole quota at once (platform admins only).

    Flavors left out lose their quota; the audit event holds the quota before and
    after, so one change reads as one event.
    """
    _require_platform_admin(actor)
    tenant = Tenant.objects.select_for_update().get(pk=tenant.pk)
    names = [line.flavor for line in flavors]
    known = {f.name: f for f in GpuFlavor.objects.filter(name__in=names)}
    errors: dict[str, list[str]] = {}
    seen: set[str] = set()
    for index, line in enumerate(flavors):
        if line.flavor not in known:
            errors[f"flavors.{index}.flavor"] = [unknown_flavor_message(line.flavor)]
        elif line.flavor in seen:
            errors[f"flavors.{index}.flavor"] = [f"Flavor {line.flavor!r} is listed twice."]
        seen.add(line.flavor)
        if line.lend_limit is not None and line.lend_limit > line.gpus:
            errors[f"flavors.{index}.lend_limit"] = [
                f"A tenant can lend at most its nominal quota: {line.lend_limit} is more "
                f"than the {line.gpus} nominal GPUs on {line.flavor}."
            ]
    if errors:
        raise ValidationError(errors)
    before = _quota_state(tenant)
    Quota.objects.for_tenant(tenant).exclude(flavor__name__in=names).delete()
    existing = {q.flavor_id: q for q in Quota.objects.for_tenant(tenant)}
    for line in flavors:
        flavor = known[line.flavor]
        quota = existing.get(flavor.pk) or Quota(tenant=tenant, flavor=flavor)
        quota.gpus, quota.borrow_limit = line.gpus, line.borrow_limit
        quota.lend_limit = line.lend_limit
        quota.full_clean(validate_unique=False, validate_constraints=False)
        quota.save()
    tenant.cpu_quota, tenant.memory_quota_gib = cpu, memory_gib
    tenant.full_clean()
    tenant.save(update_fields=["cpu_quota", "memory_quota_gib"])
    audit_record(
        actor=actor,
        action="quota.set",
        obj=tenant,
        tenant=tenant,
        object_type="quota",
        data={"before": before, "after": _quota_state(tenant)},
    )
    _ensure_visible(actor=actor, tenant=tenant)
    return tenant
