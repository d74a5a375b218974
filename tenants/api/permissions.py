"""Who may call the tenants API's platform-level endpoints.

These answer early, with the right status, before a body is parsed; the services make
the same checks again, since the dashboard and tasks call them directly.
"""

from __future__ import annotations

from typing import Any

from rest_framework import permissions
from rest_framework.request import Request

from tenants import selectors


class PlatformAdminWrites(permissions.BasePermission):
    """Reads for every authenticated user, writes for platform admins.

    Writes on one object are decided after the object was found in the caller's
    visible queryset, so that an invisible object is a 404 rather than a 403.
    """

    message = "Only platform admins may change this."

    def has_permission(self, request: Request, view: Any) -> bool:
        on_one_object = (view.lookup_url_kwarg or view.lookup_field) in view.kwargs
        if request.method in permissions.SAFE_METHODS or on_one_object:
            return True
        return selectors.is_platform_admin(request.user)

    def has_object_permission(self, request: Request, view: Any, obj: Any) -> bool:
        return request.method in permissions.SAFE_METHODS or selectors.is_platform_admin(
            request.user
        )


class PlatformAdminActions(permissions.BasePermission):
    """Actions named in ``view.platform_admin_actions`` need a platform admin."""

    message = "Only platform admins may do this."

    def has_permission(self, request: Request, view: Any) -> bool:
        if view.action in getattr(view, "platform_admin_actions", ()):
            return selectors.is_platform_admin(request.user)
        return True


class PlatformAdminOnly(permissions.BasePermission):
    """Platform admins only, reads included (the tree names every team's cohort)."""

    message = "Only platform admins may see or change the cohort tree."

    def has_permission(self, request: Request, view: Any) -> bool:
        return selectors.is_platform_admin(request.user)
