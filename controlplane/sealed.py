"""Secrets stored in the database, sealed with the settings' Fernet keys (the fleet's
Kubernetes credentials): the first key seals, every key opens, so keys rotate."""

from __future__ import annotations

import base64
import hashlib

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured


class UnsealError(Exception):
    """A sealed value that none of the configured keys opens (a key was removed)."""


def _keys() -> MultiFernet:
    keys = list(settings.FLEET_CREDENTIAL_KEYS)
    if not keys:
        # Derived, so that a deployment without its own key still never stores plain text.
        digest = hashlib.sha256(b"gangway fleet credentials\0" + settings.SECRET_KEY.encode())
        keys = [base64.urlsafe_b64encode(digest.digest()).decode()]
    try:
        return MultiFernet([Fernet(key) for key in keys])
    except ValueError as exc:
        raise ImproperlyConfigured(
            f"FLEET_CREDENTIAL_KEYS: each key must be 32 url-safe base64-encoded bytes ({exc})"
        ) from exc


def seal(plain: str) -> str:
    """``plain`` encrypted with the first key ("" stays "": nothing to hide)."""
    return _keys().encrypt(plain.encode()).decode() if plain else ""


def unseal(sealed: str) -> str:
    """The plain text of :func:`seal`'s output; raises :class:`UnsealError`."""
    if not sealed:
        return ""
    try:
        return _keys().decrypt(sealed.encode()).decode()
    except InvalidToken as exc:
        raise UnsealError("no configured key opens this secret") from exc


def reseal(sealed: str) -> str:
    """The same secret sealed again with the first key (after a rotation); raises
    :class:`UnsealError`."""
    if not sealed:
        return ""
    try:
        return _keys().rotate(sealed.encode()).decode()
    except InvalidToken as exc:
        raise UnsealError("no configured key opens this secret") from exc
