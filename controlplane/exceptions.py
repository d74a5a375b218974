"""Exceptions services raise, independent of any interface.

The REST layer maps them to status codes (``controlplane.api.errors``) and the dashboard
to messages, so a rule refused in a service reads the same everywhere.
"""

from __future__ import annotations


class ServiceConflict(Exception):
    """The request is valid but the current state refuses it (HTTP 409).

    ``code`` is a stable machine-readable reason, e.g. ``user_cap`` or ``invalid_state``.
    """

    def __init__(self, message: str, *, code: str = "conflict") -> None:
        super().__init__(message)
        self.message = message
        self.code = code
