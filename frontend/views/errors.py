"""The 403, 404 and 500 pages: the dashboard's look, and the reason in plain words.

Django calls these (``handler403``/``handler404`` in ``controlplane/urls.py``) for any
``PermissionDenied`` or ``Http404`` that a view lets through; the reason is the
exception's message, which the views and services word for people ("Requesting a
cluster needs the engineer role in Acme; you are a viewer."). Under ``/api/`` the answer
stays JSON in the API's error format (the API's own views never get here: DRF answers
for them; only a path that matches no route does).
"""

from __future__ import annotations

import sys

from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.template import loader
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from controlplane.api.errors import error_body
from controlplane.middleware import current_request_id

DEFAULT_REASONS = {
    403: "You may not see or do this.",
    404: "There is nothing here, or nothing you can see.",
}


def _reason(exception: Exception | None, status: int) -> str:
    # A resolver's 404 carries a dict of the patterns it tried; only plain messages
    # written for people are shown.
    args = getattr(exception, "args", ())
    if args and isinstance(args[0], str) and args[0].strip():
        return args[0]
    return DEFAULT_REASONS[status]


def _answer(request: HttpRequest, exception: Exception | None, status: int) -> HttpResponse:
    reason = _reason(exception, status)
    if request.path.startswith("/api/"):
        # Only a path that matches no API route gets here: the API's own not-found body.
        if status == 404:
            return JsonResponse(error_body("not_found", "Not found."), status=404)
        return JsonResponse(error_body("permission_denied", reason), status=403)
    return render(request, f"{status}.html", {"status": status, "reason": reason}, status=status)


def permission_denied(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """403: what the user may not do, and why (their role, usually)."""
    return _answer(request, exception, 403)


def page_not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """404: what is missing. Another tenant's objects are missing too (STYLE 3)."""
    return _answer(request, exception, 404)


# How long a client should wait before asking again while the database is away (a
# restart or failover takes seconds).
DATABASE_RETRY_AFTER_SECONDS = 5


def server_error(request: HttpRequest) -> HttpResponse:
    """500: something failed on our side. The page needs nothing that could fail again
    (no database, no signed-in user, no context processors): a plain template with the
    request id, which the logs carry too, so that an operator can find what happened."""
    failure = sys.exc_info()[1]
    if isinstance(failure, OperationalError | InterfaceError):
        return database_unavailable(request)
    if isinstance(failure, RedisConnectionError | RedisTimeoutError):
        return cache_unavailable(request)
    request_id = current_request_id()
    reason = "Something went wrong on our side, and it was logged."
    if request_id:
        reason += f" Quote request id {request_id} when you report it."
    if request.path.startswith("/api/"):
        return JsonResponse(error_body("server_error", reason), status=500)
    page = loader.get_template("500.html").render({"reason": reason, "request_id": request_id})
    return HttpResponse(page, status=500)


def database_unavailable(request: HttpRequest) -> HttpResponse:
    """503 with ``Retry-After`` for a lost database, raised in a view or a middleware:
    every such exception reaches :func:`server_error`. Nothing was changed; the next
    request opens a new connection, so the app recovers once the database is back."""
    reason = (
        "The database is unavailable for a moment; nothing was changed. "
        f"Try again in {DATABASE_RETRY_AFTER_SECONDS} seconds."
    )
    return _unavailable(request, "database_unavailable", reason)


def cache_unavailable(request: HttpRequest) -> HttpResponse:
    """503 with ``Retry-After``: the cache (Redis) could not be reached. What needs it
    on a request's path is what guards sign-in (the lockout counters, which fail closed:
    a password is not checked while failures cannot be counted) and the sign-in
    provider's caches; found by ``reliability/infra.py``, which restarts Redis."""
    reason = (
        "A service gangway depends on (its cache) is unavailable for a moment. "
        f"Try again in {DATABASE_RETRY_AFTER_SECONDS} seconds."
    )
    return _unavailable(request, "cache_unavailable", reason)


def _unavailable(request: HttpRequest, code: str, reason: str) -> HttpResponse:
    if request.path.startswith("/api/"):
        response: HttpResponse = JsonResponse(error_body(code, reason), status=503)
    else:
        page = loader.get_template("500.html").render(
            {"reason": reason, "status": 503, "heading": "Back in a moment"}
        )
        response = HttpResponse(page, status=503)
    response["Retry-After"] = str(DATABASE_RETRY_AFTER_SECONDS)
    return response
