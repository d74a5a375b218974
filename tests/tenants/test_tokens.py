"""A user's API tokens: list them, revoke one or all, and never let a cache keep one."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client
from knox.models import AuthToken
from rest_framework.test import APIClient

from tenants.models import AuditEvent

PASSWORD = "correct-horse-battery"


def _client(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


@pytest.fixture
def bobs_tokens(bob: Any) -> list[tuple[AuthToken, str]]:
    return [AuthToken.objects.create(user=bob) for _ in range(3)]


def test_a_user_lists_their_own_tokens_without_secrets(
    bob: Any, alice: Any, bobs_tokens: Any
) -> None:
    AuthToken.objects.create(user=alice)
    (current, key), *_ = bobs_tokens
    response = _client(key).get("/api/v1/auth/tokens/")
    assert response.status_code == 200
    items = response.json()["results"]
    assert response.json()["count"] == 3
    assert {item["id"] for item in items} == {t.digest[:16] for t, _ in bobs_tokens}
    assert set(items[0]) == {"id", "token_key", "created", "expiry", "current"}
    assert [item["id"] for item in items if item["current"]] == [current.digest[:16]]
    body = response.content.decode()
    for token, secret in bobs_tokens:
        assert secret not in body and token.digest not in body
        assert token.token_key in body  # the visible prefix, to tell the tokens apart


def test_expired_tokens_are_not_listed(bob: Any, bobs_tokens: Any) -> None:
    from datetime import timedelta

    from django.utils import timezone

    expired, _ = bobs_tokens[1]
    AuthToken.objects.filter(pk=expired.pk).update(expiry=timezone.now() - timedelta(hours=1))
    listed = _client(bobs_tokens[0][1]).get("/api/v1/auth/tokens/").json()["results"]
    ids = {item["id"] for item in listed}
    assert expired.digest[:16] not in ids and len(ids) == 2


def test_revoking_one_token_by_id(bob: Any, bobs_tokens: Any) -> None:
    (_, key), (other, other_key), _ = bobs_tokens
    response = _client(key).delete(f"/api/v1/auth/tokens/{other.digest[:16]}/")
    assert response.status_code == 204
    assert not AuthToken.objects.filter(pk=other.pk).exists()
    assert _client(other_key).get("/api/v1/users/me/").status_code == 401
    assert _client(key).get("/api/v1/users/me/").status_code == 200
    event = AuditEvent.objects.get(action="token.revoke")
    assert event.actor == bob and event.object_id == other.digest[:16]


@pytest.mark.parametrize("token_id", ["0123456789abcdef", "zz", "a" * 200, "%20"])
def test_another_users_or_an_unknown_token_is_404(
    bob: Any, alice: Any, bobs_tokens: Any, token_id: str
) -> None:
    alices, _ = AuthToken.objects.create(user=alice)
    key = bobs_tokens[0][1]
    for target in (alices.digest[:16], token_id):
        response = _client(key).delete(f"/api/v1/auth/tokens/{target}/")
        assert response.status_code == 404
        assert response.json() == {"error": {"code": "not_found", "message": "Not found."}}
    assert AuthToken.objects.count() == 4
    assert not AuditEvent.objects.exists()


def test_revoking_all_tokens(bob: Any, alice: Any, bobs_tokens: Any) -> None:
    _, alices_key = AuthToken.objects.create(user=alice)
    key = bobs_tokens[0][1]
    response = _client(key).delete("/api/v1/auth/tokens/")
    assert response.status_code == 200
    assert response.json() == {"revoked": 3}
    assert not AuthToken.objects.filter(user=bob).exists()
    for _, secret in bobs_tokens:
        assert _client(secret).get("/api/v1/users/me/").status_code == 401
    assert _client(alices_key).get("/api/v1/users/me/").status_code == 200
    event = AuditEvent.objects.get(action="token.revoke_all")
    assert event.actor == bob and event.data["count"] == 3


def test_a_browser_session_manages_tokens_too(bob: Any, bobs_tokens: Any) -> None:
    browser = Client()
    browser.force_login(bob)
    items = browser.get("/api/v1/auth/tokens/").json()["results"]
    assert len(items) == 3 and not any(item["current"] for item in items)


def _responses(bob: Any, bobs_tokens: Any) -> dict[str, Any]:
    key = bobs_tokens[0][1]
    login = json.dumps({"username": "bob", "password": PASSWORD})
    wrong = json.dumps({"username": "bob", "password": "nope"})
    anonymous = APIClient()
    return {
        "issue": anonymous.post("/api/v1/auth/token/", login, content_type="application/json"),
        "refused": anonymous.post("/api/v1/auth/token/", wrong, content_type="application/json"),
        "list": _client(key).get("/api/v1/auth/tokens/"),
        "revoke_one": _client(key).delete(f"/api/v1/auth/tokens/{bobs_tokens[1][0].digest[:16]}/"),
        "revoke_all": _client(bobs_tokens[2][1]).delete("/api/v1/auth/tokens/"),
        "anonymous_list": anonymous.get("/api/v1/auth/tokens/"),
    }


def test_every_token_response_forbids_caching(bob: Any, bobs_tokens: Any) -> None:
    responses = _responses(bob, bobs_tokens)
    assert responses["issue"].status_code == 200 and responses["anonymous_list"].status_code == 401
    for name, response in responses.items():
        assert "no-store" in response["Cache-Control"], name
        assert response["Pragma"] == "no-cache", name


def test_the_schema_describes_the_token_routes(db: Any) -> None:
    schema = APIClient().get("/api/schema/?format=json").json()
    paths = schema["paths"]
    assert set(paths["/api/v1/auth/tokens/"]) == {"get", "delete"}
    assert set(paths["/api/v1/auth/tokens/{token_id}/"]) == {"delete"}
    listed = paths["/api/v1/auth/tokens/"]["get"]["responses"]["200"]
    ref = listed["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[-1]
    item = schema["components"]["schemas"][ref]["properties"]["results"]["items"]["$ref"]
    fields = schema["components"]["schemas"][item.rsplit("/", 1)[-1]]["properties"]
    assert set(fields) == {"id", "token_key", "created", "expiry", "current"}


def test_a_request_reads_only_the_token_it_presents(bob: Any, bobs_tokens: Any) -> None:
    from datetime import timedelta

    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    # knox itself read all of bob's tokens on every request to prune the expired ones.
    for token, _ in bobs_tokens[1:]:
        AuthToken.objects.filter(pk=token.pk).update(expiry=timezone.now() - timedelta(hours=1))
    with CaptureQueriesContext(connection) as captured:
        response = _client(bobs_tokens[0][1]).get("/api/v1/auth/tokens/")
    assert response.status_code == 200
    token_reads = [
        q for q in captured if 'FROM "knox_authtoken"' in q["sql"] and "COUNT(" not in q["sql"]
    ]
    # One to authenticate, one for the list this endpoint returns.
    assert len(token_reads) == 2, [q["sql"] for q in token_reads]
    assert AuthToken.objects.filter(user=bob).count() == 3


def test_an_expired_token_is_refused_and_deleted(bob: Any, bobs_tokens: Any) -> None:
    from datetime import timedelta

    from django.utils import timezone

    token, key = bobs_tokens[0]
    AuthToken.objects.filter(pk=token.pk).update(expiry=timezone.now() - timedelta(seconds=1))
    assert _client(key).get("/api/v1/auth/tokens/").status_code == 401
    assert not AuthToken.objects.filter(pk=token.pk).exists()


def test_the_beat_purges_expired_tokens_only(bob: Any, alice: Any, bobs_tokens: Any) -> None:
    from datetime import timedelta

    from django.conf import settings
    from django.utils import timezone

    from tenants.tasks import purge_expired_tokens

    alices, _ = AuthToken.objects.create(user=alice)
    expired = [bobs_tokens[1][0].pk, alices.pk]
    AuthToken.objects.filter(pk__in=expired).update(expiry=timezone.now() - timedelta(minutes=5))
    assert purge_expired_tokens() == 2
    assert AuthToken.objects.filter(pk__in=expired).count() == 0
    assert AuthToken.objects.filter(user=bob).count() == 2
    schedule = settings.CELERY_BEAT_SCHEDULE["purge-expired-tokens"]
    assert schedule["task"] == purge_expired_tokens.name


def test_the_lookup_reads_what_knox_s_query_reads(bob: Any, bobs_tokens: Any) -> None:
    from django.forms.models import model_to_dict

    from controlplane.api.authentication import _candidates

    for token, _ in bobs_tokens:
        (found,) = _candidates(token.token_key)
        (orm,) = AuthToken.objects.filter(token_key=token.token_key).select_related("user")
        assert model_to_dict(found) == model_to_dict(orm)
        assert (found.digest, found.created, found.expiry) == (orm.digest, orm.created, orm.expiry)
        assert model_to_dict(found.user) == model_to_dict(orm.user)
        assert found._state.adding is False and found.user.is_authenticated
    assert _candidates("no-such-key") == []
