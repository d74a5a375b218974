"""Throttles: a tight one for credential checks, a generous one for writes.

Both identify an anonymous caller by :func:`controlplane.addresses.client_address`,
the one rule for a client's address, never by a header the client writes.
"""

from __future__ import annotations

from typing import Any

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from rest_framework.request import Request
from rest_framework.throttling import AnonRateThrottle, UserRateThrottle

from controlplane.addresses import address_bucket, client_address


class ClientAddressIdent:
    """Keys anonymous callers on the client's address (an IPv6 client on its /64)."""

    def get_ident(self, request: Request) -> str:
        return address_bucket(client_address(request))


class AuthThrottle(ClientAddressIdent, AnonRateThrottle):
    """Limits password logins per client address, wrong or right (brute force)."""

    scope = "auth"


class WriteThrottle(ClientAddressIdent, UserRateThrottle):
    """Limits mutating requests per user; reads are never throttled."""

    scope = "write"

    def allow_request(self, request: Request, view: Any) -> bool:
        if request.method in ("GET", "HEAD", "OPTIONS"):
            return True
        try:
            return super().allow_request(request, view)
        except (RedisConnectionError, RedisTimeoutError, OSError):
            # The counters' cache (Redis) is down or restarting. This throttle spreads
            # capacity, it guards no secret, and quotas are enforced in the database:
            # a write is let through rather than refused with a 500 for as long as the
            # cache is away (found by reliability/infra.py).
            return True
