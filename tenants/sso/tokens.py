"""Checking a bearer access token from the provider: signature, issuer, audience, time.

The keys come from the provider's ``jwks_uri`` through PyJWT's ``PyJWKClient``, kept for
``OIDC_JWKS_CACHE_SECONDS`` and fetched again for an unseen key id at most once per
``OIDC_JWKS_MIN_REFRESH_SECONDS``, so made-up key ids cannot make every request call the
provider. Only the asymmetric algorithms of ``OIDC_ALGORITHMS`` are accepted. Nothing here
writes: a refused token leaves no trace but a 401.
"""

from __future__ import annotations

import threading
from typing import Any

import jwt
from django.conf import settings

from tenants.sso import provider

_lock = threading.Lock()
_key_clients: dict[str, jwt.PyJWKClient] = {}

_HINT = "Sign in again (gangway login) to get a new token from the identity provider."


class InvalidToken(Exception):
    """The token is refused; the message says why, in words a user can act on."""


def _key_client(jwks_uri: str) -> jwt.PyJWKClient:
    with _lock:
        client = _key_clients.get(jwks_uri)
        if client is None:
            client = jwt.PyJWKClient(
                jwks_uri,
                cache_jwk_set=True,
                lifespan=settings.OIDC_JWKS_CACHE_SECONDS,
                timeout=settings.OIDC_TIMEOUT_SECONDS,
                cooldown_duration=settings.OIDC_JWKS_MIN_REFRESH_SECONDS,
            )
            _key_clients[jwks_uri] = client
    return client


def forget() -> None:
    """Drop the cached key sets (tests that rotate or change providers)."""
    with _lock:
        _key_clients.clear()


def _signing_key(token: str) -> tuple[Any, str]:
    try:
        header = jwt.get_unverified_header(token)
    except jwt.PyJWTError as exc:
        raise InvalidToken(f"The bearer token is not a JSON Web Token ({exc}).") from exc
    alg = header.get("alg")
    if alg not in settings.OIDC_ALGORITHMS:
        raise InvalidToken(
            f"The token is signed with {alg!r}; gangway accepts only "
            f"{', '.join(settings.OIDC_ALGORITHMS)} (OIDC_ALGORITHMS)."
        )
    kid = header.get("kid")
    if not isinstance(kid, str) or not kid:
        raise InvalidToken("The token names no signing key (no 'kid' in its header).")
    try:
        jwks_uri = provider.metadata()["jwks_uri"]
    except (provider.ProviderUnavailable, KeyError) as exc:
        raise InvalidToken(f"The identity provider cannot be reached to check it: {exc}") from exc
    try:
        return _key_client(jwks_uri).get_signing_key(kid).key, alg
    except jwt.PyJWKClientConnectionError as exc:
        raise InvalidToken(f"The provider's keys cannot be read to check it: {exc}") from exc
    except jwt.PyJWKClientError as exc:
        raise InvalidToken(
            "The token is signed with a key the identity provider does not publish."
        ) from exc


def verify_access_token(token: str) -> dict[str, Any]:
    """The claims of a valid access token; raises :class:`InvalidToken` otherwise."""
    key, alg = _signing_key(token)
    try:
        claims: dict[str, Any] = jwt.decode(
            token,
            key,
            algorithms=[alg],
            audience=settings.OIDC_AUDIENCE or None,
            issuer=settings.OIDC_ISSUER,
            leeway=settings.OIDC_CLOCK_SKEW_SECONDS,
            options={"require": ["exp", "iat", "iss", "sub"], "verify_aud": True},
        )
    except jwt.ExpiredSignatureError as exc:
        raise InvalidToken(f"The token has expired. {_HINT}") from exc
    except jwt.ImmatureSignatureError as exc:
        raise InvalidToken(
            "The token is not valid yet (its 'nbf' or 'iat' is in the future); check the "
            "clocks of this server and of the provider (OIDC_CLOCK_SKEW_SECONDS)."
        ) from exc
    except jwt.InvalidAudienceError as exc:
        raise InvalidToken(
            "The token was issued for another audience; gangway accepts "
            f"{', '.join(settings.OIDC_AUDIENCE) or 'none'} (OIDC_AUDIENCE)."
        ) from exc
    except jwt.InvalidIssuerError as exc:
        raise InvalidToken(
            f"The token was issued by another provider, not {settings.OIDC_ISSUER}."
        ) from exc
    except jwt.InvalidSignatureError as exc:
        raise InvalidToken("The token's signature does not verify.") from exc
    except jwt.MissingRequiredClaimError as exc:
        raise InvalidToken(f"The token has no {exc.claim!r} claim.") from exc
    except jwt.PyJWTError as exc:
        raise InvalidToken(f"The token is refused: {exc}.") from exc
    return claims
