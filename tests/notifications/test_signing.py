"""Webhook secrets and signatures (notifications.signing): HMAC-SHA256 over
``<timestamp>.<body>``, checked in constant time, as docs/notifications.md tells a
receiver to verify it."""

from __future__ import annotations

import hashlib
import hmac

from notifications.signing import SECRET_PREFIX, new_secret, signature, verify


def test_a_secret_is_prefixed_and_fresh_each_time() -> None:
    first, second = new_secret(), new_secret()
    assert first.startswith(SECRET_PREFIX) and len(first) == len(SECRET_PREFIX) + 64
    assert first != second


def test_the_signature_is_the_documented_hmac() -> None:
    body = b'{"event":"test"}'
    expected = hmac.new(b"whsec_k", b"1700000000." + body, hashlib.sha256).hexdigest()
    assert signature("whsec_k", "1700000000", body) == f"sha256={expected}"


def test_verify_refuses_another_body_timestamp_or_secret() -> None:
    body = b"{}"
    header = signature("whsec_k", "1700000000", body)
    assert verify("whsec_k", "1700000000", body, header)
    assert not verify("whsec_k", "1700000001", body, header)  # replayed later
    assert not verify("whsec_k", "1700000000", b"{ }", header)
    assert not verify("whsec_other", "1700000000", body, header)
