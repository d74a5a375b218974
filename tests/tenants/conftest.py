"""Helpers for the tenants API tests: a snapshot of every table a write could touch."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from knox.models import AuthToken

from tenants.models import AuditEvent, GpuFlavor, Membership, Quota, Tenant


def row_counts() -> dict[str, Any]:
    """Row counts plus the quota and tenant contents, to prove a refused write wrote nothing."""
    return {
        "users": get_user_model().objects.count(),
        "tenants": list(Tenant.objects.order_by("pk").values()),
        "memberships": list(Membership.objects.order_by("pk").values("tenant", "user", "role")),
        "flavors": list(GpuFlavor.objects.order_by("pk").values()),
        "quotas": list(Quota.objects.order_by("pk").values("tenant", "flavor", "gpus")),
        "audit": AuditEvent.objects.count(),
        "tokens": AuthToken.objects.count(),
    }


@pytest.fixture
def everyone(
    acme: Any, globex: Any, alice: Any, bob: Any, vera: Any, charlie: Any, root: Any
) -> Any:
    """All fixture actors at once."""
    return {"alice": alice, "bob": bob, "vera": vera, "charlie": charlie, "root": root}
