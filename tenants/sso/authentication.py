"""``Authorization: Bearer <access token>`` from the identity provider, for the API.

The token is checked against the provider's keys (``tokens``), then its identity is synced
(``identity``), so a user who left a group loses its role within ``OIDC_SYNC_CACHE_SECONDS``.
A token without the groups claim has them read from the userinfo endpoint, cached as
briefly. A refused token is a 401 that says why; nothing is written for it. Only values
shaped like a JSON Web Token are read here (gangway's own tokens after ``Bearer`` are
:mod:`controlplane.api.authentication`'s); with single sign-on off, a provider token is
refused with a message naming the header gangway's own tokens use.
"""

from __future__ import annotations

import hashlib
from typing import Any

from django.conf import settings
from django.core.cache import cache
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication
from rest_framework.exceptions import AuthenticationFailed

from controlplane.api.authentication import is_jwt_shaped
from tenants.sso import identity, provider, tokens


class ProviderToken:
    """``request.auth`` of a bearer-authenticated request: the token's checked claims."""

    def __init__(self, claims: dict[str, Any]) -> None:
        self.claims = claims


def _userinfo_groups(token: str) -> Any:
    """The groups claim of the token's userinfo (cached briefly), or None without one."""
    key = "sso:userinfo:" + hashlib.sha256(token.encode()).hexdigest()[:40]
    cached = cache.get(key)
    if cached is not None:
        return cached
    info = provider.userinfo(token)
    if not isinstance(info, dict):
        return None
    groups = info.get(settings.OIDC_GROUPS_CLAIM) or []
    cache.set(key, groups, max(settings.OIDC_SYNC_CACHE_SECONDS, 1))
    return groups


class BearerAuthentication(authentication.BaseAuthentication):
    """Authenticates API requests that carry the identity provider's access token."""

    keyword = "Bearer"

    def authenticate(self, request: Any) -> tuple[Any, ProviderToken] | None:
        parts = authentication.get_authorization_header(request).split()
        if not parts or parts[0].lower() != self.keyword.lower().encode():
            return None
        if len(parts) == 2 and not is_jwt_shaped(parts[1]):
            return None  # a gangway API token (controlplane.api.authentication)
        if not provider.enabled():
            raise AuthenticationFailed(
                "Single sign-on is not configured here, so provider tokens are not "
                "accepted; send a gangway API token as 'Authorization: Token <key>' "
                "(or 'Authorization: Bearer <key>')."
            )
        if len(parts) != 2:
            raise AuthenticationFailed("Send 'Authorization: Bearer <token>' (one token).")
        try:
            token = parts[1].decode("ascii")
        except UnicodeDecodeError as exc:
            raise AuthenticationFailed("The bearer token is not a JSON Web Token.") from exc
        try:
            claims = tokens.verify_access_token(token)
        except tokens.InvalidToken as exc:
            raise AuthenticationFailed(str(exc)) from exc
        groups = None
        if settings.OIDC_GROUPS_CLAIM not in claims:
            groups = _userinfo_groups(token)
        try:
            user = identity.identity_user(identity.Identity.from_claims(claims, groups))
        except identity.SignInRefused as exc:
            raise AuthenticationFailed(str(exc)) from exc
        return user, ProviderToken(claims)

    def authenticate_header(self, request: Any) -> str:
        return f'{self.keyword} realm="api"'


class BearerScheme(OpenApiAuthenticationExtension):  # type: ignore[no-untyped-call]
    """Documents the provider's bearer tokens in the OpenAPI schema."""

    target_class = "tenants.sso.authentication.BearerAuthentication"
    name = "oidcBearer"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return {
            "type": "http",
            "scheme": "bearer",
            "bearerFormat": "JWT",
            "description": "An access token from the identity provider (single sign-on).",
        }
