"""tenants.services.guards: the checks every service makes before and after writing."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import PermissionDenied

from tenants.services.guards import ensure_visible, require_platform_admin


def test_only_platform_admins_pass_the_platform_check(root: Any, alice: Any) -> None:
    require_platform_admin(root)
    with pytest.raises(PermissionDenied):
        require_platform_admin(alice)


def test_a_tenant_outside_the_actors_view_is_refused(alice: Any, acme: Any, globex: Any) -> None:
    ensure_visible(actor=alice, tenant=acme)
    with pytest.raises(PermissionDenied):
        ensure_visible(actor=alice, tenant=globex)
