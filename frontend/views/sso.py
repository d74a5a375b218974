"""The browser's side of single sign-on: sign in at the provider, come back, sign out.

``/sso/login/`` sends the browser to the provider (authorization code, PKCE S256, state
and nonce in the session by Authlib); ``/sso/callback/`` trades the code, checks the ID
token, syncs the user and roles (``tenants.sso.identity``) and signs in. ``/logout/``
also sends a provider's session to its end-session endpoint (RP-initiated logout), so
the next sign-in asks for a password. A failure is the sign-in page saying what
happened, never a server error.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import urlencode

import requests
from authlib.common.errors import AuthlibBaseError
from authlib.integrations.base_client.errors import MismatchingStateError
from django.conf import settings
from django.contrib.auth import login, logout
from django.contrib.auth.views import LoginView
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotAllowed
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from joserfc.errors import JoseError

from tenants.sso import identity, provider
from tenants.sso.session import SESSION_KEY, session_record

logger = logging.getLogger(__name__)
_NEXT = "sso_next"


def sign_in_choices() -> dict[str, Any]:
    """What the sign-in page offers: the provider's button, the password form, or both."""
    return {
        "sso_enabled": provider.enabled(),
        "sso_name": settings.OIDC_PROVIDER_NAME,
        "local_login": settings.OIDC_LOCAL_LOGIN or not provider.enabled(),
    }


class SignInView(LoginView):
    """Django's sign-in page, with the single sign-on button when it is configured.

    With ``OIDC_LOCAL_LOGIN`` off the password form is not shown and a password posted
    anyway is refused with a message pointing at the provider (``/admin/login/`` and the
    API's token endpoint keep passwords for break-glass accounts).
    """

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        return {**super().get_context_data(**kwargs), **sign_in_choices()}

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not sign_in_choices()["local_login"]:
            return _failed(
                request, f"Sign in with {settings.OIDC_PROVIDER_NAME}: passwords are off here."
            )
        response: HttpResponse = super().post(request, *args, **kwargs)
        return response


def _failed(request: HttpRequest, message: str, status: int = 400) -> HttpResponse:
    logger.info("single sign-on failed: %s", message)
    context = {"sso_error": message, "next": request.session.get(_NEXT, ""), **sign_in_choices()}
    return render(request, "frontend/login.html", context, status=status)


def _safe_next(request: HttpRequest, candidate: str) -> str:
    if candidate and url_has_allowed_host_and_scheme(
        candidate, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return candidate
    return str(settings.LOGIN_REDIRECT_URL)


def sso_login(request: HttpRequest) -> HttpResponse:
    """Send the browser to the provider to sign in."""
    if not provider.enabled():
        raise Http404("Single sign-on is not configured.")
    request.session[_NEXT] = _safe_next(request, request.GET.get("next", ""))
    redirect_uri = settings.OIDC_REDIRECT_URI or request.build_absolute_uri(reverse("sso-callback"))
    try:
        response: HttpResponse = provider.web_client().authorize_redirect(request, redirect_uri)
    except (requests.RequestException, AuthlibBaseError, ValueError, KeyError) as exc:
        return _failed(
            request, f"{settings.OIDC_PROVIDER_NAME} cannot be reached ({exc}); try again.", 200
        )
    return response


def _claims_and_groups(token: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    claims = dict(token.get("userinfo") or {})
    if settings.OIDC_GROUPS_CLAIM in claims:
        return claims, None
    # Some providers put groups only in userinfo; ask it once, at sign-in.
    info = provider.userinfo(str(token.get("access_token", "")))
    if not isinstance(info, dict):
        raise requests.ConnectionError(f"its userinfo endpoint answered {info or 'nothing'}")
    return claims, info.get(settings.OIDC_GROUPS_CLAIM) or []


def sso_callback(request: HttpRequest) -> HttpResponse:
    """Trade the provider's code for tokens and sign the user in."""
    if not provider.enabled():
        raise Http404("Single sign-on is not configured.")
    try:
        token = provider.web_client().authorize_access_token(request)
        claims, groups = _claims_and_groups(token)
    except MismatchingStateError:
        return _failed(
            request,
            "This sign-in began in another browser tab or has expired; sign in again.",
        )
    except AuthlibBaseError as exc:
        detail = getattr(exc, "description", "") or getattr(exc, "error", "") or str(exc)
        return _failed(request, f"{settings.OIDC_PROVIDER_NAME} refused the sign-in: {detail}")
    except JoseError as exc:
        return _failed(request, f"The identity token does not verify: {exc}")
    except (requests.RequestException, ValueError) as exc:
        return _failed(request, f"{settings.OIDC_PROVIDER_NAME} cannot be reached: {exc}", 200)
    if "sub" not in claims:
        return _failed(request, "The identity token names nobody (no 'sub' claim).")
    try:
        user = identity.identity_sync(identity.Identity.from_claims(claims, groups))
    except identity.SignInRefused as exc:
        return _failed(request, str(exc), 403)
    next_url = request.session.pop(_NEXT, "") or settings.LOGIN_REDIRECT_URL
    login(request, user, backend="tenants.sso.backends.SsoBackend")
    request.session[SESSION_KEY] = session_record(token, claims)
    return redirect(_safe_next(request, str(next_url)))


def sign_out(request: HttpRequest) -> HttpResponse:
    """End the session (POST only, as Django's own logout) and, for a single sign-on
    session, the provider's session too."""
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    record = request.session.get(SESSION_KEY)
    logout(request)
    after = request.build_absolute_uri(str(settings.LOGOUT_REDIRECT_URL))
    if not (record and provider.enabled()):
        return redirect(settings.LOGOUT_REDIRECT_URL)
    try:
        end_session = provider.metadata().get("end_session_endpoint")
    except provider.ProviderUnavailable:
        end_session = None
    if not end_session:
        return redirect(settings.LOGOUT_REDIRECT_URL)
    query = urlencode(
        {
            "id_token_hint": record.get("id_token", ""),
            "post_logout_redirect_uri": after,
            "client_id": settings.OIDC_CLIENT_ID,
        }
    )
    separator = "&" if "?" in end_session else "?"
    return redirect(f"{end_session}{separator}{query}")
