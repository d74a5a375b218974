"""The endpoint's access routes of the services API without a loop: the secret is shown
once and never listed, a bad body is a 400 that writes nothing, revoking twice is a 404,
and the public switch answers a tenant admin only."""

from __future__ import annotations

from typing import Any

import pytest

from clusters.models import ClusterRequest, Service, ServiceToken
from tests.clusters.kinds.rayservice.samples import queued_service

pytestmark = pytest.mark.django_db

SD = "/api/v1/tenants/acme/services/sd/"


@pytest.fixture
def service(acme: Any, bob: Any) -> ClusterRequest:
    """bob's service, queued (the routes do not depend on its state)."""
    return queued_service(acme, bob)


def test_a_token_is_created_listed_without_its_secret_and_revoked_once(
    service: ClusterRequest, bob: Any, as_user: Any
) -> None:
    api = as_user(bob)
    created = api.post(SD + "tokens/", {"name": "frontend"}, format="json")
    assert created.status_code == 201, created.content
    secret = created.json()["token"]
    listed = api.get(SD + "tokens/").json()
    assert listed["count"] == 1
    assert listed["results"][0]["name"] == "frontend"
    assert "token" not in listed["results"][0]
    assert secret not in str(listed)
    token_id = listed["results"][0]["id"]
    assert api.delete(SD + f"tokens/{token_id}/").status_code == 204
    again = api.delete(SD + f"tokens/{token_id}/")
    assert again.status_code == 404
    assert "has no token" in again.json()["error"]["message"]


@pytest.mark.parametrize("body", [{}, {"name": ""}, {"name": "x", "scope": "all"}])
def test_a_bad_token_body_is_a_400_that_writes_nothing(
    service: ClusterRequest, bob: Any, as_user: Any, body: dict[str, Any]
) -> None:
    answer = as_user(bob).post(SD + "tokens/", body, format="json")
    assert answer.status_code == 400, answer.content
    assert not ServiceToken.objects.exists()


def test_the_public_switch_answers_an_admin_only(
    service: ClusterRequest, alice: Any, bob: Any, vera: Any, as_user: Any
) -> None:
    for user in (bob, vera):
        assert (
            as_user(user).post(SD + "public/", {"public": True}, format="json").status_code == 403
        )
    assert not Service.objects.get(pk=service.pk).public
    made = as_user(alice).post(SD + "public/", {"public": True}, format="json")
    assert made.status_code == 200
    assert made.json() == {"public": True}
    assert Service.objects.get(pk=service.pk).public
    assert (
        as_user(alice).post(SD + "public/", {"public": "maybe"}, format="json").status_code == 400
    )
