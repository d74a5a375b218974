"""Web request latency per URL route, method and status class (docs/metrics.md).

The route is the resolved URL pattern's name (or its pattern when it has no name), never
the path: a path names a cluster or a tenant, and each would be a series of its own.
Requests no pattern matched (404s, static files) share the route ``unmatched``.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from django.conf import settings
from django.core.exceptions import MiddlewareNotUsed
from django.http import HttpRequest, HttpResponse

from controlplane import metrics

# Methods outside these are one label value, so a client's made-up verbs add no series.
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


def route_of(request: HttpRequest) -> str:
    """The bounded label of the URL pattern ``request`` resolved to."""
    match = getattr(request, "resolver_match", None)
    if match is None:
        return "unmatched"
    return match.view_name or match.route or "unmatched"


class RequestMetricsMiddleware:
    """Observes each request's duration in ``gangway_http_request_seconds``."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        if not settings.REQUEST_METRICS:
            raise MiddlewareNotUsed
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        started = time.perf_counter()
        response = self.get_response(request)
        method = request.method if request.method in _METHODS else "other"
        status = f"{response.status_code // 100}xx"
        metrics.API_SECONDS.labels(route_of(request), method, status).observe(
            time.perf_counter() - started
        )
        return response
