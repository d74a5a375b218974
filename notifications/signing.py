"""Webhook secrets and signatures (pure: no database).

A body is signed with HMAC-SHA256 over ``<timestamp>.<raw body>``, the timestamp being
the ``X-Gangway-Timestamp`` header (Unix seconds): a receiver that checks it refuses
old bodies replayed. See docs/notifications.md for how to verify.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

SECRET_PREFIX = "whsec_"


def new_secret() -> str:
    """A fresh webhook secret (256 random bits), as shown to its owner once."""
    return SECRET_PREFIX + secrets.token_hex(32)


def signature(secret: str, timestamp: str, body: bytes) -> str:
    """The ``X-Gangway-Signature`` header value of ``body`` sent at ``timestamp``."""
    mac = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


def verify(secret: str, timestamp: str, body: bytes, header: str) -> bool:
    """Whether ``header`` is the signature of ``body`` at ``timestamp`` (constant time)."""
    return hmac.compare_digest(signature(secret, timestamp, body), header)
