"""A tenant's members: add them, change their role, remove them (the tenant's admins
and platform admins); a tenant always keeps one admin."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction

from controlplane.exceptions import ServiceConflict
from tenants.audit import audit_record
from tenants.models import Membership, MembershipSource, Role, Tenant
from tenants.selectors import role_in_tenant, role_may_grant
from tenants.services.guards import ensure_visible

# The least role that may add and remove members of a tenant.
MANAGE_MEMBERS_ROLE = Role.ADMIN


def _refuse_provider_managed(membership: Membership) -> None:
    if membership.source == MembershipSource.PROVIDER:
        raise ServiceConflict(
            f"{membership.user.get_username()}'s role in {membership.tenant.slug} comes from "
            "the identity provider's groups; change it there.",
            code="managed_by_provider",
        )


def _refuse_last_admin(membership: Membership, *, tenant: Tenant, advice: str, code: str) -> None:
    # Somebody must always be able to manage the tenant's members.
    if membership.role != Role.ADMIN:
        return
    if Membership.objects.filter(tenant=tenant, role=Role.ADMIN).count() <= 1:
        raise ServiceConflict(
            f"{membership.user.get_username()} is the last admin of {tenant.slug}; {advice}.",
            code=code,
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
    ensure_visible(actor=actor, tenant=tenant)
    return membership


@transaction.atomic
def membership_set_role(*, actor: Any, membership: Membership, role: str) -> Membership:
    """Change a member's role (tenant admins and platform admins): never to or from a
    role above the actor's own, and never the tenant's last admin away from admin."""
    tenant = Tenant.objects.select_for_update(no_key=True).get(pk=membership.tenant_id)
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
    _refuse_last_admin(
        membership, tenant=tenant, advice="make another member admin first", code="last_admin"
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
    tenant = Tenant.objects.select_for_update(no_key=True).get(pk=membership.tenant_id)
    actor_role = _require_member_manager(actor=actor, tenant=tenant)
    if not role_may_grant(granter_role=actor_role, role=membership.role):
        raise PermissionDenied("You cannot remove a member whose role is above your own.")
    _refuse_provider_managed(membership)
    _refuse_last_admin(membership, tenant=tenant, advice="add another admin first", code="conflict")
    audit_record(
        actor=actor,
        action="membership.remove",
        obj=membership,
        tenant=tenant,
        data={"username": membership.user.get_username(), "role": membership.role},
    )
    membership.delete()
