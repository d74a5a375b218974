"""The OpenID provider as gangway sees it: its metadata, and the dashboard's client.

The metadata (``<issuer>/.well-known/openid-configuration``) names every endpoint, so a
provider is configured by its issuer URL and a client; it is kept for
``OIDC_JWKS_CACHE_SECONDS`` in each process. The browser's flow uses Authlib's Django
client, which does the parts easy to get subtly wrong (PKCE, state, nonce, the ID token's
checks) and reads the metadata, where mozilla-django-oidc wants every endpoint by hand.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import requests
from authlib.integrations.django_client import OAuth
from django.conf import settings

from tenants.sso.rules import Rule, parse_rules

_lock = threading.Lock()
_metadata: dict[str, tuple[float, dict[str, Any]]] = {}
_clients: dict[tuple[str, str], Any] = {}


class ProviderUnavailable(Exception):
    """The provider's metadata could not be read; the message says how it failed."""


def enabled() -> bool:
    """Whether single sign-on is configured (``OIDC_ISSUER`` set)."""
    return bool(settings.OIDC_ISSUER)


def rules() -> tuple[Rule, ...]:
    """The configured group-to-role rules (validated at start-up by a system check)."""
    return parse_rules(settings.OIDC_ROLE_RULES)


def metadata() -> dict[str, Any]:
    """The provider's discovery document, cached; raises :class:`ProviderUnavailable`."""
    issuer = settings.OIDC_ISSUER
    now = time.monotonic()
    with _lock:
        cached = _metadata.get(issuer)
    if cached and now - cached[0] < settings.OIDC_JWKS_CACHE_SECONDS:
        return cached[1]
    url = f"{issuer}/.well-known/openid-configuration"
    try:
        response = requests.get(url, timeout=settings.OIDC_TIMEOUT_SECONDS)
        response.raise_for_status()
        document = response.json()
    except (requests.RequestException, ValueError) as exc:
        raise ProviderUnavailable(f"cannot read {url}: {exc}") from exc
    if not isinstance(document, dict) or document.get("issuer", "").rstrip("/") != issuer:
        found = document.get("issuer") if isinstance(document, dict) else None
        raise ProviderUnavailable(
            f"{url} names the issuer {found!r}, not OIDC_ISSUER={issuer!r}; "
            "set OIDC_ISSUER to exactly the provider's issuer"
        )
    with _lock:
        _metadata[issuer] = (now, document)
    return document


def call(method: str, url: str, **kwargs: Any) -> requests.Response | None:
    """One request to the provider: its response, or None when it cannot be reached or
    fails on its side (a 5xx), which every caller treats alike: ask again later."""
    try:
        response = requests.request(method, url, timeout=settings.OIDC_TIMEOUT_SECONDS, **kwargs)
    except requests.RequestException:
        return None
    return None if response.status_code >= 500 else response


def userinfo(access_token: str) -> dict[str, Any] | int | None:
    """The provider's userinfo for ``access_token``: its claims, the HTTP status of a
    refusal (401, 403), or None when the provider cannot be reached or answers nonsense."""
    try:
        endpoint = metadata().get("userinfo_endpoint")
    except ProviderUnavailable:
        return None
    if not endpoint:
        return None
    response = call("GET", endpoint, headers={"Authorization": f"Bearer {access_token}"})
    if response is None:
        return None
    if response.status_code != 200:
        return response.status_code
    try:
        claims = response.json()
    except ValueError:
        return None
    return claims if isinstance(claims, dict) else None


def web_client() -> Any:
    """Authlib's client for the dashboard: authorization code with PKCE (S256)."""
    key = (settings.OIDC_ISSUER, settings.OIDC_CLIENT_ID)
    with _lock:
        client = _clients.get(key)
        if client is None:
            registry = OAuth()
            client = registry.register(
                name="gangway",
                client_id=settings.OIDC_CLIENT_ID,
                client_secret=settings.OIDC_CLIENT_SECRET,
                server_metadata_url=f"{settings.OIDC_ISSUER}/.well-known/openid-configuration",
                client_kwargs={
                    "scope": settings.OIDC_SCOPES,
                    "code_challenge_method": "S256",
                    "timeout": settings.OIDC_TIMEOUT_SECONDS,
                },
            )
            _clients[key] = client
    return client


def forget() -> None:
    """Drop the cached metadata and clients (tests that change the settings)."""
    with _lock:
        _metadata.clear()
        _clients.clear()
