"""Signing keys: the active one, the inactive ones still published, and rotation.

DOT reads its keys from ``oauth2_settings`` on every use: the JWKS view lists
``OIDC_RSA_PRIVATE_KEY`` then each of ``OIDC_RSA_PRIVATE_KEYS_INACTIVE``, and ID tokens are
signed with ``Application.jwk_key``, which is the active key. ``oauth2_settings`` caches each
setting as an attribute of itself the first time it is read, so rotating means assigning
those attributes in this process (and the OAUTH2_PROVIDER dict too, so a settings reload
would see the same keys). That is why the provider is one process with threads, never
several workers.

A key's ``kid`` is its RFC 7638 thumbprint, as DOT writes it in the JWKS and in ID tokens.
"""

from __future__ import annotations

import threading

from django.conf import settings
from jwcrypto import jwk
from oauth2_provider.settings import oauth2_settings
from oauth2_provider.utils import jwk_from_pem

from tests.oidc.provider.settings import new_rsa_private_key_pem

_lock = threading.Lock()


def active_pem() -> str:
    return str(oauth2_settings.OIDC_RSA_PRIVATE_KEY)


def inactive_pems() -> list[str]:
    return list(oauth2_settings.OIDC_RSA_PRIVATE_KEYS_INACTIVE)


def kid(pem: str) -> str:
    return str(jwk_from_pem(pem).thumbprint())


def active_key() -> jwk.JWK:
    return jwk_from_pem(active_pem())


def key_for_kid(wanted: str) -> jwk.JWK | None:
    """The published key (active or inactive) whose kid is ``wanted``, if any."""
    for pem in [active_pem(), *inactive_pems()]:
        if kid(pem) == wanted:
            return jwk_from_pem(pem)
    return None


def _set(active: str, inactive: list[str]) -> None:
    oauth2_settings.OIDC_RSA_PRIVATE_KEY = active
    oauth2_settings.OIDC_RSA_PRIVATE_KEYS_INACTIVE = inactive
    settings.OAUTH2_PROVIDER["OIDC_RSA_PRIVATE_KEY"] = active
    settings.OAUTH2_PROVIDER["OIDC_RSA_PRIVATE_KEYS_INACTIVE"] = inactive


def rotate() -> None:
    """A new active key; the old one stays in the JWKS (inactive) so its tokens still verify."""
    new = new_rsa_private_key_pem()
    with _lock:
        _set(new, [active_pem(), *inactive_pems()])


def forget_inactive() -> None:
    """Drop every inactive key from the JWKS: tokens they signed no longer verify."""
    with _lock:
        _set(active_pem(), [])


def describe() -> dict[str, object]:
    return {"active_kid": kid(active_pem()), "inactive_kids": [kid(p) for p in inactive_pems()]}
