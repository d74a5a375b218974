"""``POST .../clusters/{name}/extend/``: one rule for the hours (shared with the
dashboard), and nothing to extend on a cluster without a time to live."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from clusters.domain import shapes
from clusters.models import ClusterRequest
from tenants.models import AuditEvent


@pytest.fixture
def ready(acme: Any, bob: Any, h100: Any) -> ClusterRequest:
    now = timezone.now()
    return ClusterRequest.objects.create(
        tenant=acme,
        owner=bob,
        name="bob-ready",
        kind="dev",
        flavor=h100,
        workers=1,
        gpus=1,
        state="ready",
        holds_gpus=True,
        ttl_hours=8,
        admitted_at=now,
        expires_at=now + timedelta(hours=8),
    )


def _unchanged(cluster: ClusterRequest) -> tuple[Any, ...]:
    cluster.refresh_from_db()
    return (cluster.ttl_hours, cluster.expires_at, AuditEvent.objects.count())


@pytest.mark.parametrize("hours", [2_147_483_648, 10**30, 0, -1, "abc", "", None, True, 4.5])
def test_bad_hours_are_a_400_and_change_nothing(
    as_user: Any, bob: Any, ready: ClusterRequest, hours: Any
) -> None:
    before = _unchanged(ready)
    response = as_user(bob).post(
        "/api/v1/tenants/acme/clusters/bob-ready/extend/", {"hours": hours}, format="json"
    )
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "invalid" and "hours" in error["fields"], error
    assert _unchanged(ready) == before


def test_the_bound_is_the_shared_one(as_user: Any, bob: Any, ready: ClusterRequest) -> None:
    url = "/api/v1/tenants/acme/clusters/bob-ready/extend/"
    response = as_user(bob).post(url, {"hours": shapes.MAX_HOURS + 1}, format="json")
    assert response.json()["error"]["fields"]["hours"] == [shapes.EXTEND_HOURS_MESSAGE]
    # Within the shared bound, the tenant's maximum lifetime (72 h) still applies.
    response = as_user(bob).post(url, {"hours": shapes.MAX_HOURS}, format="json")
    assert response.status_code == 400 and "maximum lifetime" in response.json()["error"]["message"]
    response = as_user(bob).post(url, {"hours": 4}, format="json")
    assert response.status_code == 200, response.content
    ready.refresh_from_db()
    assert ready.ttl_hours == 12


def test_a_cluster_without_a_ttl_has_nothing_to_extend(
    as_user: Any, alice: Any, acme: Any, h100: Any
) -> None:
    now = timezone.now()
    forever = ClusterRequest.objects.create(
        tenant=acme,
        owner=alice,
        name="train",
        kind="prod",
        flavor=h100,
        workers=1,
        gpus=8,
        state="ready",
        holds_gpus=True,
        ttl_hours=None,
        admitted_at=now,
    )
    before = _unchanged(forever)
    response = as_user(alice).post(
        "/api/v1/tenants/acme/clusters/train/extend/", {"hours": 4}, format="json"
    )
    assert response.status_code == 409, response.content
    assert response.json()["error"]["code"] == "no_ttl"
    assert "nothing to extend" in response.json()["error"]["message"]
    assert _unchanged(forever) == before and forever.ttl_hours is None


def test_the_service_checks_the_hours_itself(bob: Any, ready: ClusterRequest) -> None:
    from django.core.exceptions import ValidationError

    from clusters.requests import services

    for hours in (2_147_483_648, 0, -5):
        with pytest.raises(ValidationError) as caught:
            services.cluster_extend(actor=bob, cluster=ready, hours=hours)
        assert caught.value.message_dict == {"hours": [shapes.EXTEND_HOURS_MESSAGE]}
    assert _unchanged(ready)[0] == 8
