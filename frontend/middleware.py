"""Signed-out htmx requests: the browser is sent to sign in, not handed the sign-in page.

A partial that htmx asks for (the verdict panel, a polled table) after the session
ended would be redirected to the sign-in page like any page, and htmx would swap that
whole page into the panel. Instead such a request is answered with ``HX-Redirect``: htmx
loads the sign-in page in the window, with ``next`` set to the page the user was on
(``HX-Current-URL``), where gangway.js puts back what they had typed.
"""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import urlencode, urlsplit

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import resolve_url
from django.utils.http import url_has_allowed_host_and_scheme
from django_htmx.http import HttpResponseClientRedirect


def _signed_out(request: HttpRequest) -> bool:
    user = getattr(request, "user", None)
    return user is None or not user.is_authenticated


def _sends_to_sign_in(response: HttpResponse, login_path: str) -> bool:
    if response.status_code in (401, 403):
        return True
    location = response.get("Location", "") if response.status_code in (301, 302) else ""
    return urlsplit(location).path == login_path


def _page_of(request: HttpRequest) -> str:
    """The page the user was on (path and query), when it is one of ours."""
    current = request.headers.get("HX-Current-URL", "")
    if current and url_has_allowed_host_and_scheme(
        current, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        parts = urlsplit(current)
        return parts.path + (f"?{parts.query}" if parts.query else "")
    return "/"


class HtmxSignInMiddleware:
    """Turns "sign in first" into a full-page redirect for htmx requests."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if request.headers.get("HX-Request") != "true" or not _signed_out(request):
            return response
        login_path = resolve_url(settings.LOGIN_URL)
        if not _sends_to_sign_in(response, login_path):
            return response
        return HttpResponseClientRedirect(f"{login_path}?{urlencode({'next': _page_of(request)})}")
