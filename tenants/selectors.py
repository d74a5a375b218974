"""Reads about tenants, roles and the catalogue. Views, tasks and the dashboard call these."""

from __future__ import annotations

from typing import Any

from tenants.models import Membership, Role, Tenant


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


def has_role(*, user: Any, tenant: Tenant, at_least: str) -> bool:
    """Whether the user holds ``at_least`` (or a stronger role) in the tenant."""
    role = role_in_tenant(user=user, tenant=tenant)
    return role is not None and Role.rank(role) >= Role.rank(at_least)
