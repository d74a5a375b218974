"""The API with access tokens from a real OpenID provider (tests/oidc, its own process).

A token from the provider's token endpoint signs its user in (created on first use,
with the roles its groups map to); a group change at the provider takes effect at the
next request; tokens that are expired, forged, from another issuer or audience, unsigned
(``alg: none``) or signed with a shared secret are 401s that say why and write nothing;
the provider may rotate its keys; the device flow of the command line completes.
"""

from __future__ import annotations

import time
from typing import Any

import jwt
import pytest
import requests
from cryptography.hazmat.primitives.asymmetric import rsa
from django.contrib.auth import get_user_model
from knox.models import AuthToken
from rest_framework.test import APIClient

from tenants.models import AuditEvent, ExternalIdentity, Membership

pytestmark = pytest.mark.django_db


def call(token: str, path: str, method: str = "get", **body: Any) -> Any:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return getattr(client, method)(path, body or None, format="json")


def rows() -> tuple[int, int, int, int]:
    return (
        get_user_model().objects.count(),
        ExternalIdentity.objects.count(),
        Membership.objects.count(),
        AuditEvent.objects.count(),
    )


def test_a_provider_token_signs_in_with_the_roles_its_groups_map_to(sso: Any, acme: Any) -> None:
    sso.create_user("ann", groups=["gpu-acme-engineers", "unrelated"])
    token = sso.password_token("ann")["access_token"]

    me = call(token, "/api/v1/users/me/")
    assert me.status_code == 200, me.content
    assert me.json()["username"] == "ann"
    assert me.json()["memberships"] == [
        {"tenant": "acme", "tenant_name": "Acme Research", "role": "engineer", "source": "provider"}
    ]
    assert call(token, "/api/v1/tenants/acme/clusters/").status_code == 200
    user = get_user_model().objects.get(username="ann")
    assert not user.has_usable_password()
    link = ExternalIdentity.objects.get(user=user)
    assert link.issuer == sso.issuer
    assert link.groups == ["gpu-acme-engineers", "unrelated"]
    actions = list(AuditEvent.objects.order_by("id").values_list("action", "actor_name"))
    assert actions == [
        ("user.sso_create", "identity provider"),
        ("membership.sso_add", "identity provider"),
    ]


def test_a_group_change_at_the_provider_takes_effect_at_the_next_request(
    sso: Any, acme: Any, globex: Any
) -> None:
    sso.create_user("ann", groups=["gpu-acme-admins"])
    token = sso.password_token("ann")["access_token"]
    assert call(token, "/api/v1/users/me/").json()["memberships"][0]["role"] == "admin"

    sso.set_groups("ann", ["gpu-acme-viewers", "gpu-globex-engineers"])
    token = sso.password_token("ann")["access_token"]
    roles = {m["tenant"]: m["role"] for m in call(token, "/api/v1/users/me/").json()["memberships"]}
    assert roles == {"acme": "viewer", "globex": "engineer"}

    sso.set_groups("ann", ["gpu-globex-engineers"])
    token = sso.password_token("ann")["access_token"]
    assert call(token, "/api/v1/tenants/acme/clusters/").status_code == 404
    assert call(token, "/api/v1/tenants/globex/clusters/").status_code == 200
    changes = list(
        AuditEvent.objects.filter(action__startswith="membership.sso")
        .order_by("id")
        .values_list("action", "tenant_slug")
    )
    assert changes == [
        ("membership.sso_add", "acme"),
        ("membership.sso_role", "acme"),
        ("membership.sso_add", "globex"),
        ("membership.sso_remove", "acme"),
    ]


def test_local_memberships_stay_until_the_provider_grants_a_role_in_their_tenant(
    sso: Any, acme: Any, globex: Any, alice: Any
) -> None:
    from tenants import services

    sso.create_user("ann", groups=[])
    token = sso.password_token("ann")["access_token"]
    assert call(token, "/api/v1/users/me/").json()["memberships"] == []
    services.membership_add(actor=alice, tenant=acme, username="ann", role="engineer")
    assert call(token, "/api/v1/tenants/acme/clusters/").status_code == 200  # kept

    sso.set_groups("ann", ["research"])  # research -> acme viewer: the provider takes over
    token = sso.password_token("ann")["access_token"]
    (membership,) = call(token, "/api/v1/users/me/").json()["memberships"]
    assert (membership["role"], membership["source"]) == ("viewer", "provider")


def test_a_membership_from_the_provider_cannot_be_changed_here(
    sso: Any, acme: Any, as_user: Any, alice: Any
) -> None:
    sso.create_user("ann", groups=["gpu-acme-engineers"])
    call(sso.password_token("ann")["access_token"], "/api/v1/users/me/")
    client = as_user(alice)
    listed = {
        m["username"]: m for m in client.get("/api/v1/tenants/acme/members/").json()["results"]
    }
    assert listed["ann"]["source"] == "provider"
    assert listed["alice"]["source"] == "local"
    before = rows()
    changed = client.patch("/api/v1/tenants/acme/members/ann/", {"role": "viewer"}, format="json")
    assert changed.status_code == 409, changed.content
    assert changed.json()["error"]["code"] == "managed_by_provider"
    assert "identity provider" in changed.json()["error"]["message"]
    removed = client.delete("/api/v1/tenants/acme/members/ann/")
    assert removed.status_code == 409
    assert rows() == before


def test_the_platform_admins_group_makes_a_platform_admin_and_leaving_it_unmakes_one(
    sso: Any, acme: Any
) -> None:
    sso.create_user("pat", groups=["platform-admins"])
    token = sso.password_token("pat")["access_token"]
    assert call(token, "/api/v1/users/me/").json()["is_staff"] is True
    assert call(token, "/api/v1/users/").status_code == 200
    sso.set_groups("pat", [])
    token = sso.password_token("pat")["access_token"]
    assert call(token, "/api/v1/users/").status_code == 403


def _forged(sso: Any, **claims: Any) -> str:
    """A token like the provider's, signed with a key that is not the provider's."""
    kid = sso.jwks()["keys"][0]["kid"]
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    now = int(time.time())
    payload = {
        "iss": sso.issuer,
        "sub": "1",
        "aud": "gangway",
        "iat": now,
        "exp": now + 600,
        "preferred_username": "mallory",
        "groups": ["platform-admins"],
        **claims,
    }
    return jwt.encode(payload, key, algorithm="RS256", headers={"kid": kid})


@pytest.mark.parametrize(
    ("case", "words"),
    [
        ("expired", "expired"),
        ("wrong_issuer", "another provider"),
        ("wrong_audience", "another audience"),
        ("forged", "signature does not verify"),
        ("alg_none", "'none'"),
        ("hs256_with_public_key", "'HS256'"),
        ("unknown_kid", "does not publish"),
        ("not_a_jwt", "not a JSON Web Token"),
        ("future", "not valid yet"),
    ],
)
def test_a_bad_token_is_a_401_that_says_why_and_writes_nothing(
    sso: Any, acme: Any, case: str, words: str
) -> None:
    sso.create_user("ann", groups=["gpu-acme-admins", "platform-admins"])
    kid = sso.jwks()["keys"][0]["kid"]
    good = jwt.decode(sso.mint("ann"), options={"verify_signature": False})
    token = {
        "expired": lambda: sso.mint("ann", exp_offset=-3600),
        "wrong_issuer": lambda: sso.mint("ann", iss="http://127.0.0.1:1/o"),
        "wrong_audience": lambda: sso.mint("ann", aud="someone-else"),
        "forged": lambda: _forged(sso, sub=good["sub"]),
        "alg_none": lambda: jwt.encode(good, None, algorithm="none", headers={"kid": kid}),
        "hs256_with_public_key": lambda: jwt.api_jws.PyJWS(algorithms=["HS256"]).encode(
            jwt.utils.to_base64url_uint(1) + b"." + str(good).encode(),
            key="x" * 32,
            algorithm="HS256",
            headers={"kid": kid},
        ),
        "unknown_kid": lambda: jwt.encode(
            good,
            rsa.generate_private_key(public_exponent=65537, key_size=2048),
            algorithm="RS256",
            headers={"kid": "not-published"},
        ),
        # Two dots, so read as a provider token (one without is a gangway token).
        "not_a_jwt": lambda: "not.a.token",
        "future": lambda: sso.mint("ann", nbf_offset=3600, iat_offset=3600),
    }[case]()
    before = rows()
    response = call(token, "/api/v1/users/me/")
    assert response.status_code == 401, response.content
    assert words in response.json()["error"]["message"], response.json()
    assert response["WWW-Authenticate"]
    assert rows() == before


def test_keys_rotate_mid_test_and_tokens_signed_with_either_key_work(
    sso: Any, acme: Any, settings: Any
) -> None:
    settings.OIDC_JWKS_CACHE_SECONDS = 1  # so that a key the provider drops is seen gone
    sso.create_user("ann", groups=["gpu-acme-engineers"])
    before = sso.password_token("ann")["access_token"]
    assert call(before, "/api/v1/users/me/").status_code == 200  # the key set is now cached

    sso.rotate_keys()
    after = sso.password_token("ann")["access_token"]
    assert jwt.get_unverified_header(after)["kid"] != jwt.get_unverified_header(before)["kid"]
    assert call(after, "/api/v1/users/me/").status_code == 200
    assert call(before, "/api/v1/users/me/").status_code == 200

    sso.forget_old_keys()
    time.sleep(1.1)  # the cached key set expires
    refused = call(before, "/api/v1/users/me/")
    assert refused.status_code == 401
    assert call(after, "/api/v1/users/me/").status_code == 200


def test_groups_come_from_userinfo_when_the_token_has_none(sso: Any, acme: Any) -> None:
    sso.create_user("ann", groups=["gpu-acme-admins"])
    token = sso.mint("ann", groups=None)
    assert "groups" not in jwt.decode(token, options={"verify_signature": False})
    me = call(token, "/api/v1/users/me/").json()
    assert me["memberships"][0]["role"] == "admin"


def test_a_user_deactivated_here_is_refused_even_with_a_valid_token(sso: Any, acme: Any) -> None:
    sso.create_user("ann", groups=["gpu-acme-admins"])
    token = sso.password_token("ann")["access_token"]
    assert call(token, "/api/v1/users/me/").status_code == 200
    get_user_model().objects.filter(username="ann").update(is_active=False)
    refused = call(token, "/api/v1/users/me/")
    assert refused.status_code == 401
    assert "deactivated" in refused.json()["error"]["message"]


def test_within_the_sync_cache_a_token_costs_no_write(
    sso: Any, acme: Any, settings: Any, django_assert_max_num_queries: Any
) -> None:
    settings.OIDC_SYNC_CACHE_SECONDS = 30
    sso.create_user("ann", groups=["gpu-acme-engineers"])
    token = sso.password_token("ann")["access_token"]
    assert call(token, "/api/v1/users/me/").status_code == 200
    events = AuditEvent.objects.count()
    seen = ExternalIdentity.objects.get().last_seen_at
    assert call(token, "/api/v1/users/me/").status_code == 200
    assert ExternalIdentity.objects.get().last_seen_at == seen
    assert AuditEvent.objects.count() == events


def test_the_command_lines_device_flow_completes_and_its_token_works(sso: Any, acme: Any) -> None:
    sso.create_user("ann", groups=["gpu-acme-engineers"])
    config = APIClient().get("/api/v1/auth/sso/").json()
    assert config["enabled"] is True
    assert config["client_id"] == sso.cli_client_id
    assert "offline_access" in config["scope"]
    started = requests.post(
        config["device_authorization_endpoint"],
        data={"client_id": config["client_id"], "scope": config["scope"]},
        timeout=10,
    ).json()
    grant = {
        "grant_type": "urn:ietf:params:oauth:grant-type:device_code",
        "device_code": started["device_code"],
        "client_id": config["client_id"],
    }
    pending = requests.post(config["token_endpoint"], data=grant, timeout=10)
    assert pending.json()["error"] == "authorization_pending"
    sso.device_approve(started["user_code"], "ann")
    tokens = requests.post(config["token_endpoint"], data=grant, timeout=10).json()
    assert call(tokens["access_token"], "/api/v1/tenants/acme/clusters/").status_code == 200


def test_without_single_sign_on_a_bearer_token_is_refused_naming_the_token_header(
    acme: Any,
) -> None:
    assert APIClient().get("/api/v1/auth/sso/").json() == {"enabled": False}
    refused = call("eyJhbGciOiJSUzI1NiJ9.e30.sig", "/api/v1/users/me/")
    assert refused.status_code == 401
    assert "Authorization: Token" in refused.json()["error"]["message"]


def _gangway_tokens_after_bearer(user: Any) -> None:
    """A gangway API token works after ``Bearer`` as after ``Token``; a wrong value that
    is not a JWT is refused exactly as a wrong ``Token`` value, saying nothing of which
    kind of token was tried."""
    key = AuthToken.objects.create(user=user)[1]
    for header in (f"Bearer {key}", f"bearer {key}", f"Token {key}"):
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=header)
        me = client.get("/api/v1/users/me/")
        assert me.status_code == 200, (header, me.content)
        assert me.json()["username"] == user.username

    def refused(header: str) -> tuple[int, bytes, str]:
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=header)
        response = client.get("/api/v1/users/me/")
        return response.status_code, response.content, response["WWW-Authenticate"]

    wrong_token = refused("Token " + "0" * 64)
    assert wrong_token[0] == 401
    for value in ("0" * 64, key[:-1] + "x", "not-a-token", "abc\x00def"):
        assert refused(f"Bearer {value}") == wrong_token, value
    assert refused(f"Bearer {key} extra")[0] == 401


def test_a_gangway_token_works_as_a_bearer_token_with_single_sign_on(sso: Any, bob: Any) -> None:
    _gangway_tokens_after_bearer(bob)


def test_a_gangway_token_works_as_a_bearer_token_without_single_sign_on(bob: Any) -> None:
    assert APIClient().get("/api/v1/auth/sso/").json() == {"enabled": False}
    _gangway_tokens_after_bearer(bob)
