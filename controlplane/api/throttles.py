"""Throttles: a tight one for credential checks, a generous one for writes."""

from __future__ import annotations

from typing import Any

from rest_framework.request import Request
from rest_framework.throttling import AnonRateThrottle, UserRateThrottle


class AuthThrottle(AnonRateThrottle):
    """Limits password logins per client address (brute-force protection)."""

    scope = "auth"


class WriteThrottle(UserRateThrottle):
    """Limits mutating requests per user; reads are never throttled."""

    scope = "write"

    def allow_request(self, request: Request, view: Any) -> bool:
        if request.method in ("GET", "HEAD", "OPTIONS"):
            return True
        return super().allow_request(request, view)
