"""Query counts of every list endpoint are pinned and do not grow with the rows.

Each endpoint is read with 3 and with 30 rows to list; both must issue exactly the
pinned number of queries (count + page, plus the one lookup of the tenant with the
caller's role on scoped routes). A serializer that starts querying per row breaks the
equality at once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tenants.audit import audit_record
from tenants.models import GpuFlavor, Role
from tests.factories import (
    GpuFlavorFactory,
    MembershipFactory,
    QuotaFactory,
    TenantFactory,
    UserFactory,
)


def _users(start: int, n: int, w: Any) -> None:
    UserFactory.create_batch(n)


def _flavors(start: int, n: int, w: Any) -> None:
    for i in range(start, start + n):
        GpuFlavorFactory(name=f"f{i}")


def _tenants(start: int, n: int, w: Any) -> None:
    for i in range(start, start + n):
        MembershipFactory(tenant=TenantFactory(slug=f"t{i}"), user=w["bob"], role=Role.VIEWER)


def _members(start: int, n: int, w: Any) -> None:
    for user in UserFactory.create_batch(n):
        MembershipFactory(tenant=w["acme"], user=user, role=Role.VIEWER)


def _quotas(start: int, n: int, w: Any) -> None:
    for i in range(start, start + n):
        QuotaFactory(tenant=w["acme"], flavor=GpuFlavorFactory(name=f"q{i}"), gpus=i)


def _audit(start: int, n: int, w: Any) -> None:
    from django.db import transaction

    with transaction.atomic():
        for i in range(start, start + n):
            audit_record(
                actor=w["alice"],
                action="test.event",
                tenant=w["acme"],
                obj=GpuFlavor.objects.first(),
                data={"i": i},
            )


# name -> (actor, url, make rows, pinned queries)
ENDPOINTS: dict[str, tuple[str, str, Callable[[int, int, Any], None], int]] = {
    "users": ("root", "/api/v1/users/?page_size=500", _users, 2),
    # + each flavor's nodes per Kubernetes cluster (and one more for the clusters' names
    # once any flavor is listed on one: none here).
    "flavors": ("bob", "/api/v1/flavors/?page_size=500", _flavors, 3),
    "tenants (platform admin)": ("root", "/api/v1/tenants/?page_size=500", _tenants, 2),
    "tenants (member)": ("bob", "/api/v1/tenants/?page_size=500", _tenants, 2),
    "members": ("vera", "/api/v1/tenants/acme/members/?page_size=500", _members, 3),
    "quotas": ("vera", "/api/v1/tenants/acme/quotas/", _quotas, 2),
    "audit (platform admin)": ("root", "/api/v1/audit/?page_size=500", _audit, 2),
    "audit (tenant admin)": ("alice", "/api/v1/audit/?page_size=500", _audit, 2),
}


@pytest.mark.parametrize("name", sorted(ENDPOINTS))
def test_list_query_count_is_pinned(everyone: Any, acme: Any, as_user: Any, name: str) -> None:
    actor, url, make, pinned = ENDPOINTS[name]
    world = {**everyone, "acme": acme}
    client = as_user(everyone[actor])
    counts = []
    made = 0
    for total in (3, 30):
        make(made, total - made, world)
        made = total
        with CaptureQueriesContext(connection) as ctx:
            response = client.get(url)
        assert response.status_code == 200
        counts.append(len(ctx.captured_queries))
    assert counts == [pinned, pinned], f"{name}: {counts}"
