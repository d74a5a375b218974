"""Query counts of the cluster list endpoints are pinned and do not grow with the rows."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from clusters.models import ClusterRequest
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def _fill(tenant: Any, flavor: Any, count: int, state: str) -> None:
    owners = [UserFactory(username=f"owner{i}") for i in range(3)]
    ClusterRequest.objects.bulk_create(
        ClusterRequest(
            tenant=tenant,
            owner=owners[i % 3],
            name=f"{state}-{i}",
            kind="dev",
            flavor=flavor,
            workers=1,
            gpus=1,
            state=state,
            queue_position=i + 1,
            queue_reason="tenant_quota",
        )
        for i in range(count)
    )


def _queries(client: Any, url: str) -> int:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    assert response.status_code == 200, response.content
    return len(captured)


@pytest.mark.parametrize(
    ("url", "actor", "state", "expected"),
    [
        # A cold page: the list cache's fingerprint, then tenant, count, page, events.
        ("/api/v1/tenants/acme/clusters/", "bob", "ready", 5),
        ("/api/v1/tenants/acme/queue/", "bob", "queued", 3),
        ("/api/v1/queue/", "root", "queued", 2),
    ],
)
def test_list_queries_are_constant(
    as_user: Any,
    bob: Any,
    root: Any,
    acme: Any,
    h100: Any,
    url: str,
    actor: str,
    state: str,
    expected: int,
) -> None:
    client = as_user(bob if actor == "bob" else root)
    _fill(acme, h100, 3, state)
    few = _queries(client, url)
    ClusterRequest.objects.all().delete()
    _fill(acme, h100, 30, state)
    many = _queries(client, url)
    assert few == many == expected
