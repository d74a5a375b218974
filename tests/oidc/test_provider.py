"""The test OpenID provider works end to end, over HTTP only, with real signed tokens.

These tests check the fixture (tests/oidc/fixtures.py), not gangway: what they show is what
gangway's SSO tests may rely on.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
from typing import Any
from urllib.parse import parse_qs, urlsplit

import jwt
import pytest
import requests

from tests.oidc.fixtures import OidcProvider

CALLBACK = "http://127.0.0.1:9/auth/callback"  # never followed: nothing listens on port 9
SIGNED_OUT = "http://127.0.0.1:9/signed-out"


def verify(provider: OidcProvider, token: str, audience: str = "gangway") -> dict[str, Any]:
    """Verify ``token`` as a relying party would: the key its kid names in the JWKS, RS256,
    issuer, audience, expiry."""
    jwks = jwt.PyJWKSet.from_dict(provider.jwks())
    key = jwks[jwt.get_unverified_header(token)["kid"]]
    claims: dict[str, Any] = jwt.decode(
        token, key.key, algorithms=["RS256"], audience=audience, issuer=provider.issuer
    )
    return claims


def pkce_pair() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    digest = hashlib.sha256(verifier.encode()).digest()
    return verifier, base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def authorize(provider: OidcProvider, session: requests.Session, challenge: str) -> str:
    """The browser's trip to /authorize (already signed in): returns the code."""
    response = session.get(
        provider.discovery["authorization_endpoint"],
        params={
            "response_type": "code",
            "client_id": provider.web_client_id,
            "redirect_uri": CALLBACK,
            "scope": "openid profile email groups",
            "state": "st4te",
            "nonce": "n0nce",
            "code_challenge": challenge,
            "code_challenge_method": "S256",
        },
        allow_redirects=False,
        timeout=10,
    )
    assert response.status_code == 302, response.text
    location = response.headers["Location"]
    assert location.startswith(CALLBACK + "?")
    query = parse_qs(urlsplit(location).query)
    assert query["state"] == ["st4te"]
    return query["code"][0]


def exchange(provider: OidcProvider, code: str, verifier: str | None) -> requests.Response:
    data = {"grant_type": "authorization_code", "code": code, "redirect_uri": CALLBACK}
    if verifier is not None:
        data["code_verifier"] = verifier
    return provider.token_request(data, auth=(provider.web_client_id, provider.web_client_secret))


def test_discovery_names_every_endpoint(oidc_provider: OidcProvider) -> None:
    discovery = oidc_provider.discovery
    issuer = oidc_provider.issuer
    assert issuer.startswith("http://127.0.0.1:")
    assert discovery["issuer"] == issuer
    assert discovery["authorization_endpoint"] == f"{issuer}/authorize/"
    assert discovery["token_endpoint"] == f"{issuer}/token/"
    assert discovery["userinfo_endpoint"] == f"{issuer}/userinfo/"
    assert discovery["jwks_uri"] == f"{issuer}/.well-known/jwks.json"
    assert discovery["end_session_endpoint"] == f"{issuer}/logout/"
    assert discovery["device_authorization_endpoint"] == f"{issuer}/device-authorization/"
    assert discovery["code_challenge_methods_supported"] == ["S256"]
    assert "RS256" in discovery["id_token_signing_alg_values_supported"]
    assert {"groups", "preferred_username", "email"} <= set(discovery["claims_supported"])
    assert {"openid", "groups"} <= set(discovery["scopes_supported"])


def test_password_grant_gives_a_jwt_that_verifies_against_the_jwks(
    oidc_provider: OidcProvider,
) -> None:
    user = oidc_provider.create_user(
        "ann", "pw-ann", groups=["vision-admins", "eng"], name="Ann Lee"
    )
    tokens = oidc_provider.password_token("ann", "pw-ann")

    header = jwt.get_unverified_header(tokens["access_token"])
    assert header["alg"] == "RS256"
    assert header["kid"] == oidc_provider.keys()["active_kid"]
    assert header["kid"] in [key["kid"] for key in oidc_provider.jwks()["keys"]]
    claims = verify(oidc_provider, tokens["access_token"])
    assert claims["sub"] == user["sub"]
    assert claims["aud"] == "gangway"
    assert claims["client_id"] == oidc_provider.test_client_id
    assert claims["groups"] == ["eng", "vision-admins"]
    assert claims["preferred_username"] == "ann"
    assert claims["email"] == "ann@example.com"
    assert claims["name"] == "Ann Lee"
    assert claims["scope"].split() == ["openid", "profile", "email", "groups"]
    assert claims["exp"] - claims["iat"] == tokens["expires_in"] == 3600
    assert claims["nbf"] == claims["iat"] and claims["jti"]

    # The token endpoint's JWT is a real DOT access token: userinfo accepts it.
    userinfo = requests.get(
        oidc_provider.discovery["userinfo_endpoint"],
        headers={"Authorization": f"Bearer {tokens['access_token']}"},
        timeout=10,
    )
    assert userinfo.status_code == 200, userinfo.text
    assert userinfo.json()["groups"] == ["eng", "vision-admins"]
    assert userinfo.json()["preferred_username"] == "ann"


def test_group_changes_deactivation_audience_and_lifetime(oidc_provider: OidcProvider) -> None:
    oidc_provider.create_user("bo", groups=["eng"])
    oidc_provider.set_groups("bo", ["platform-admins"])
    oidc_provider.set_audience("gangway-staging")
    oidc_provider.set_access_token_lifetime(60)
    tokens = oidc_provider.password_token("bo")
    claims = verify(oidc_provider, tokens["access_token"], audience="gangway-staging")
    assert claims["groups"] == ["platform-admins"]
    assert claims["exp"] - claims["iat"] == tokens["expires_in"] == 60

    oidc_provider.deactivate("bo")
    refused = oidc_provider.token_request(
        {"grant_type": "password", "username": "bo", "password": "password"},
        auth=(oidc_provider.test_client_id, oidc_provider.test_client_secret),
    )
    assert refused.status_code == 400
    assert refused.json()["error"] == "invalid_grant"


def test_refresh_grant_gives_a_new_jwt(oidc_provider: OidcProvider) -> None:
    oidc_provider.create_user("cy", groups=["eng"])
    first = oidc_provider.password_token("cy")
    oidc_provider.set_groups("cy", ["eng", "ops"])
    response = oidc_provider.refresh(first["refresh_token"])
    assert response.status_code == 200, response.text
    second = response.json()
    assert second["access_token"] != first["access_token"]
    assert second["refresh_token"] != first["refresh_token"]
    claims = verify(oidc_provider, second["access_token"])
    assert claims["groups"] == ["eng", "ops"]  # read afresh at refresh
    assert claims["jti"] != verify(oidc_provider, first["access_token"])["jti"]


def test_authorization_code_with_pkce(oidc_provider: OidcProvider) -> None:
    oidc_provider.create_user("di", "pw-di", groups=["vision"])
    oidc_provider.set_redirect_uris([CALLBACK])
    browser = oidc_provider.login(requests.Session(), "di", "pw-di")

    verifier, challenge = pkce_pair()
    response = exchange(oidc_provider, authorize(oidc_provider, browser, challenge), verifier)
    assert response.status_code == 200, response.text
    tokens = response.json()
    assert verify(oidc_provider, tokens["access_token"])["client_id"] == "gangway-web"
    id_claims = verify(oidc_provider, tokens["id_token"], audience="gangway-web")
    assert id_claims["nonce"] == "n0nce"
    assert id_claims["groups"] == ["vision"]
    assert id_claims["preferred_username"] == "di"
    assert id_claims["email"] == "di@example.com"
    assert tokens["refresh_token"]

    # Without the verifier, or with the wrong one, the code is refused.
    code = authorize(oidc_provider, browser, pkce_pair()[1])
    refused = exchange(oidc_provider, code, None)
    assert refused.status_code == 400, refused.text
    code = authorize(oidc_provider, browser, challenge)
    refused = exchange(oidc_provider, code, pkce_pair()[0])
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"] == "invalid_grant"

    # And /authorize itself refuses a request without a challenge (PKCE is required).
    response = browser.get(
        oidc_provider.discovery["authorization_endpoint"],
        params={
            "response_type": "code",
            "client_id": oidc_provider.web_client_id,
            "redirect_uri": CALLBACK,
            "scope": "openid",
        },
        allow_redirects=False,
        timeout=10,
    )
    assert response.status_code == 302
    assert parse_qs(urlsplit(response.headers["Location"]).query)["error"] == ["invalid_request"]


def test_unregistered_redirect_uri_is_refused(oidc_provider: OidcProvider) -> None:
    oidc_provider.create_user("ed")
    oidc_provider.set_redirect_uris([CALLBACK])
    browser = oidc_provider.login(requests.Session(), "ed")
    response = browser.get(
        oidc_provider.discovery["authorization_endpoint"],
        params={
            "response_type": "code",
            "client_id": oidc_provider.web_client_id,
            "redirect_uri": "http://127.0.0.1:9/elsewhere",
            "scope": "openid",
            "code_challenge": pkce_pair()[1],
            "code_challenge_method": "S256",
        },
        allow_redirects=False,
        timeout=10,
    )
    assert response.status_code == 400  # an error page, never a redirect to that URI


def test_device_flow(oidc_provider: OidcProvider) -> None:
    oidc_provider.create_user("fay", "pw-fay", groups=["ml"])
    started = requests.post(
        oidc_provider.discovery["device_authorization_endpoint"],
        data={"client_id": oidc_provider.cli_client_id, "scope": "openid profile groups"},
        timeout=10,
    )
    assert started.status_code == 200, started.text
    device = started.json()
    assert device["verification_uri"] == f"{oidc_provider.issuer}/device/"
    assert device["user_code"] in device["verification_uri_complete"]
    poll = {
        "grant_type": "urn:ietf:params:oauth:grant-type:device_code",
        "device_code": device["device_code"],
        "client_id": oidc_provider.cli_client_id,
    }
    pending = oidc_provider.token_request(poll)
    assert pending.status_code == 400
    assert pending.json()["error"] == "authorization_pending"

    oidc_provider.device_approve(device["user_code"], "fay", "pw-fay")

    response = oidc_provider.token_request(poll)
    assert response.status_code == 200, response.text
    tokens = response.json()
    claims = verify(oidc_provider, tokens["access_token"])
    assert claims["client_id"] == "gangway-cli"
    assert claims["preferred_username"] == "fay"
    assert claims["groups"] == ["ml"]
    assert claims["scope"] == "openid profile groups"

    # A device code gives its tokens once.
    again = oidc_provider.token_request(poll)
    assert again.status_code == 400
    assert again.json()["error"] == "expired_token"

    refreshed = oidc_provider.refresh(tokens["refresh_token"], "gangway-cli", client_secret=None)
    assert refreshed.status_code == 200, refreshed.text
    assert verify(oidc_provider, refreshed.json()["access_token"])["client_id"] == "gangway-cli"


def test_key_rotation_keeps_old_tokens_verifiable_until_forgotten(
    oidc_provider: OidcProvider,
) -> None:
    oidc_provider.create_user("gus")
    old_token = oidc_provider.password_token("gus")["access_token"]
    old_kid = jwt.get_unverified_header(old_token)["kid"]

    keys = oidc_provider.rotate_keys()
    assert keys["inactive_kids"] == [old_kid]
    new_token = oidc_provider.password_token("gus")["access_token"]
    new_kid = jwt.get_unverified_header(new_token)["kid"]
    assert new_kid == keys["active_kid"] != old_kid
    assert [key["kid"] for key in oidc_provider.jwks()["keys"]] == [new_kid, old_kid]
    assert verify(oidc_provider, old_token)["preferred_username"] == "gus"
    assert verify(oidc_provider, new_token)["preferred_username"] == "gus"

    assert oidc_provider.forget_old_keys() == {"active_kid": new_kid, "inactive_kids": []}
    assert [key["kid"] for key in oidc_provider.jwks()["keys"]] == [new_kid]
    with pytest.raises(KeyError):
        verify(oidc_provider, old_token)


def test_minted_tokens_for_the_refusal_cases(oidc_provider: OidcProvider) -> None:
    oidc_provider.create_user("hal", groups=["eng"])
    good = verify(oidc_provider, oidc_provider.mint("hal"))
    assert good["groups"] == ["eng"] and good["aud"] == "gangway"

    with pytest.raises(jwt.ExpiredSignatureError):
        verify(oidc_provider, oidc_provider.mint("hal", exp_offset=-120))
    with pytest.raises(jwt.InvalidAudienceError):
        verify(oidc_provider, oidc_provider.mint("hal", aud="someone-else"))
    with pytest.raises(jwt.InvalidIssuerError):
        verify(oidc_provider, oidc_provider.mint("hal", iss="http://127.0.0.1:9/o"))
    with pytest.raises(jwt.ImmatureSignatureError):
        verify(oidc_provider, oidc_provider.mint("hal", nbf_offset=600))
    assert "groups" not in verify(oidc_provider, oidc_provider.mint("hal", groups=None))


def test_end_session_logs_the_browser_out_and_redirects(oidc_provider: OidcProvider) -> None:
    oidc_provider.create_user("ida")
    oidc_provider.set_redirect_uris([CALLBACK], post_logout_redirect_uris=[SIGNED_OUT])
    browser = oidc_provider.login(requests.Session(), "ida")
    verifier, challenge = pkce_pair()
    tokens = exchange(oidc_provider, authorize(oidc_provider, browser, challenge), verifier).json()
    me = oidc_provider.url("/accounts/me/")
    assert browser.get(me, timeout=10).json() == {"authenticated": True, "username": "ida"}

    # A post_logout_redirect_uri that is not registered is refused, and nobody is logged out.
    refused = browser.get(
        oidc_provider.discovery["end_session_endpoint"],
        params={
            "id_token_hint": tokens["id_token"],
            "post_logout_redirect_uri": "http://127.0.0.1:9/elsewhere",
        },
        allow_redirects=False,
        timeout=10,
    )
    assert refused.status_code == 400
    assert browser.get(me, timeout=10).json()["authenticated"] is True

    response = browser.get(
        oidc_provider.discovery["end_session_endpoint"],
        params={
            "id_token_hint": tokens["id_token"],
            "post_logout_redirect_uri": SIGNED_OUT,
            "state": "bye",
        },
        allow_redirects=False,
        timeout=10,
    )
    assert response.status_code == 302, response.text
    assert response.headers["Location"] == f"{SIGNED_OUT}?state=bye"
    assert browser.get(me, timeout=10).json() == {"authenticated": False, "username": None}


def test_signed_out_browser_is_sent_to_sign_in_and_back(oidc_provider: OidcProvider) -> None:
    """The path a real browser (Playwright) takes: /authorize, the sign-in form with its
    ``next``, back to /authorize, on to the redirect URI; then a logout without an
    id_token_hint, which asks first."""
    oidc_provider.create_user("jo", "pw-jo")
    oidc_provider.set_redirect_uris([CALLBACK], post_logout_redirect_uris=[SIGNED_OUT])
    browser = requests.Session()
    response = browser.get(
        oidc_provider.discovery["authorization_endpoint"],
        params={
            "response_type": "code",
            "client_id": oidc_provider.web_client_id,
            "redirect_uri": CALLBACK,
            "scope": "openid",
            "code_challenge": pkce_pair()[1],
            "code_challenge_method": "S256",
        },
        allow_redirects=False,
        timeout=10,
    )
    assert response.status_code == 302
    login_url = oidc_provider.url(response.headers["Location"])
    assert urlsplit(login_url).path == "/accounts/login/"
    form = browser.get(login_url, timeout=10)
    assert 'name="username"' in form.text and 'name="password"' in form.text
    assert ">Sign in</button>" in form.text
    response = browser.post(
        login_url,
        data={
            "username": "jo",
            "password": "pw-jo",
            "next": parse_qs(urlsplit(login_url).query)["next"][0],
            "csrfmiddlewaretoken": browser.cookies["csrftoken"],
        },
        allow_redirects=False,
        timeout=10,
    )
    assert response.status_code == 302
    response = browser.get(oidc_provider.url(response.headers["Location"]), allow_redirects=False)
    assert response.status_code == 302
    assert response.headers["Location"].startswith(CALLBACK + "?code=")

    logout = oidc_provider.discovery["end_session_endpoint"]
    params = {"client_id": oidc_provider.web_client_id, "post_logout_redirect_uri": SIGNED_OUT}
    prompt = browser.get(logout, params=params, timeout=10)
    assert prompt.status_code == 200 and 'name="allow"' in prompt.text
    response = browser.post(
        logout,
        data={**params, "allow": "on", "csrfmiddlewaretoken": browser.cookies["csrftoken"]},
        allow_redirects=False,
        timeout=10,
    )
    assert response.status_code == 302
    assert response.headers["Location"] == SIGNED_OUT
    assert (
        browser.get(oidc_provider.url("/accounts/me/"), timeout=10).json()["authenticated"] is False
    )
