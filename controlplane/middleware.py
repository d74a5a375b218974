"""Request-scoped context: a request id that follows the request into audit events.

The id comes from ``X-Request-ID`` when a proxy set one (so logs line up across
hops) and it is 1-64 characters of letters, digits and ``._:-``; otherwise it is
generated. The id used is echoed back in the response header.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from contextvars import ContextVar

from django.http import HttpRequest, HttpResponse

_request_id: ContextVar[str] = ContextVar("request_id", default="")
# What a caller's id may be: short, and plain enough for a log line, an HTTP header and
# the audit column (64 characters). Matched whole: ``$`` alone also accepts a trailing
# newline, which then broke the response header and would have split log lines.
_VALID = re.compile(r"[A-Za-z0-9._:-]{1,64}")


def current_request_id() -> str:
    """The id of the request being served, or "" outside a request (tasks, commands)."""
    return _request_id.get()


class RequestIdMiddleware:
    """Assigns every request an id, exposed by :func:`current_request_id`."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        incoming = request.headers.get("X-Request-ID", "")
        request_id = incoming if _VALID.fullmatch(incoming) else uuid.uuid4().hex
        token = _request_id.set(request_id)
        try:
            response = self.get_response(request)
        finally:
            _request_id.reset(token)
        response["X-Request-ID"] = request_id
        return response
