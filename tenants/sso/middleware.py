"""Ends a dashboard session that the identity provider no longer vouches for.

Runs after Django's authentication middleware, on sessions that single sign-on began
(``tenants.sso.session``). A page request whose session has ended is sent to the sign-in
page, saying why; an API or htmx request just finds itself signed out (a 401 or 403 from
the view, as for any session that has expired).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import logout
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse

from tenants.sso import provider
from tenants.sso.session import SESSION_KEY, Check, session_check


class SsoSessionMiddleware:
    """Checks single sign-on sessions with the provider every few minutes."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        session: Any = getattr(request, "session", None)
        if (
            session is not None
            and provider.enabled()
            and SESSION_KEY in session
            and request.user.is_authenticated
            and session_check(session) is Check.ENDED
        ):
            logout(request)
            if request.method == "GET" and not request.path.startswith("/api/"):
                messages.info(
                    request,
                    f"Your {settings.OIDC_PROVIDER_NAME} session has ended; sign in again.",
                )
                return redirect_to_login(request.get_full_path())
        return self.get_response(request)
