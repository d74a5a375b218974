"""Who may act: the checks every tenants service makes before and after it writes.

The services check access themselves, not only the API views, because the dashboard
and tasks call them directly.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied

from tenants.models import Tenant
from tenants.selectors import is_platform_admin


def require_platform_admin(actor: Any) -> None:
    """Refuse ``actor`` unless they are a platform admin."""
    if not is_platform_admin(actor):
        raise PermissionDenied("Only platform admins may do this.")


def ensure_visible(*, actor: Any, tenant: Tenant) -> None:
    """Refuse (and so roll back) a write that leaves ``tenant`` outside what ``actor``
    sees: after a write, the actor must still see what they changed (STYLE 3)."""
    if not Tenant.objects.visible_to(actor).filter(pk=tenant.pk).exists():
        raise PermissionDenied("The change would leave the object outside your tenants.")
