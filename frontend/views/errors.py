"""The 403, 404 and 500 pages: the dashboard's look, and the reason in plain words.

Django calls these (``handler403``/``handler404`` in ``controlplane/urls.py``) for any
``PermissionDenied`` or ``Http404`` that a view lets through; the reason is the
exception's message, which the views and services word for people ("Requesting a
cluster needs the engineer role in Acme; you are a viewer."). Under ``/api/`` the answer
stays JSON in the API's error format (the API's own views never get here: DRF answers
for them; only a path that matches no route does).
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.template import loader

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


def server_error(request: HttpRequest) -> HttpResponse:
    """500: something failed on our side. The page needs nothing that could fail again
    (no database, no signed-in user, no context processors): a plain template with the
    request id, which the logs carry too, so that an operator can find what happened."""
    request_id = current_request_id()
    reason = "Something went wrong on our side, and it was logged."
    if request_id:
        reason += f" Quote request id {request_id} when you report it."
    if request.path.startswith("/api/"):
        return JsonResponse(error_body("server_error", reason), status=500)
    page = loader.get_template("500.html").render({"reason": reason, "request_id": request_id})
    return HttpResponse(page, status=500)
