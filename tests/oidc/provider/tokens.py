"""JWT access tokens: DOT's ACCESS_TOKEN_GENERATOR, and minting for the control API.

oauthlib's ``BearerToken.create_token`` calls ``token_generator(request)`` for every grant
that issues an access token (authorization code, refresh, password and device code all go
through the one BearerToken of the server), after setting ``request.expires_in``,
``request.user``, ``request.client`` and ``request.scopes``. DOT stores the returned string
as the AccessToken's value (a text column), so userinfo and introspection still find it.

An access token is signed RS256 with the active key; its ``kid`` header is the key's
thumbprint, as in the JWKS. ``sub`` is the user's primary key as a string, as in DOT's ID
tokens.
"""

from __future__ import annotations

import json
import time
import uuid
from datetime import UTC, datetime
from typing import Any

from jwcrypto import jwt
from oauth2_provider.models import get_access_token_model, get_application_model, set_token_value
from oauth2_provider.settings import oauth2_settings

from tests.oidc.provider import keys
from tests.oidc.provider.runtime import runtime
from tests.oidc.provider.validators import group_names


def access_token_claims(
    user: Any, client_id: str, scope: str, lifetime: int, now: int | None = None
) -> dict[str, Any]:
    now = int(time.time()) if now is None else now
    claims: dict[str, Any] = {
        "iss": oauth2_settings.OIDC_ISS_ENDPOINT,
        "aud": runtime.audience,
        "iat": now,
        "nbf": now,
        "exp": now + int(lifetime),
        "jti": uuid.uuid4().hex,
        "scope": scope,
        "client_id": client_id,
    }
    if user is None:  # client credentials: the client is the subject
        claims["sub"] = client_id
        return claims
    claims.update(
        sub=str(user.pk),
        groups=group_names(user),
        preferred_username=user.get_username(),
        email=user.email,
        name=user.get_full_name() or user.get_username(),
    )
    return claims


def sign(claims: dict[str, Any], header: dict[str, Any] | None = None) -> str:
    key = keys.active_key()
    full_header = {"alg": "RS256", "typ": "at+jwt", "kid": key.thumbprint(), **(header or {})}
    token = jwt.JWT(
        header=json.dumps(full_header, separators=(",", ":")),
        claims=json.dumps(claims, separators=(",", ":")),
    )
    token.make_signed_token(key)
    return str(token.serialize())


def access_token_generator(request: Any) -> str:
    """The ACCESS_TOKEN_GENERATOR DOT hands to oauthlib (see the module docstring)."""
    user = getattr(request, "user", None)
    scope = " ".join(request.scopes or [])
    lifetime = int(getattr(request, "expires_in", None) or runtime.access_token_lifetime)
    return sign(access_token_claims(user, request.client.client_id, scope, lifetime))


def mint(
    user: Any,
    *,
    client_id: str = "gangway-test",
    scope: str = "openid profile email groups",
    exp_offset: int | None = None,
    nbf_offset: int = 0,
    iat_offset: int = 0,
    overrides: dict[str, Any] | None = None,
    header: dict[str, Any] | None = None,
) -> tuple[str, dict[str, Any]]:
    """An access token for ``user`` as the token endpoint would make it, then bent:
    ``exp_offset`` seconds from now (negative: already expired), ``nbf``/``iat`` shifted,
    any claim replaced or removed (``None``) by ``overrides``. It is saved as an
    AccessToken of ``client_id`` (when that client exists), so userinfo accepts it too."""
    now = int(time.time())
    lifetime = runtime.access_token_lifetime if exp_offset is None else exp_offset
    claims = access_token_claims(user, client_id, scope, lifetime, now=now)
    claims["nbf"] = now + nbf_offset
    claims["iat"] = now + iat_offset
    for name, value in (overrides or {}).items():
        if value is None:
            claims.pop(name, None)
        else:
            claims[name] = value
    token = sign(claims, header)
    application = get_application_model().objects.filter(client_id=client_id).first()
    if application is not None and user is not None:
        row = get_access_token_model()(
            user=user,
            application=application,
            scope=scope,
            expires=datetime.fromtimestamp(now + lifetime, tz=UTC),
        )
        set_token_value(row, token)
        row.save()
    return token, claims
