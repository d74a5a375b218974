"""Your account's password in the dashboard: change it, and reset it by email (Django's
reset views with the dashboard's templates; the link is on the sign-in page).

A temporary password set by a platform admin must be changed first: sign-in marks the
session (:func:`mark_session_on_sign_in`) and :class:`PasswordChangeRequiredMiddleware`
sends every dashboard page to the change page until it is done.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import update_session_auth_hash
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse

from frontend.account_forms import PasswordChangeForm, ResetPasswordForm
from frontend.admin_forms import attach_errors
from frontend.views.common import form_page
from tenants.services import passwords

MUST_CHANGE = "password_must_change"


def mark_session_on_sign_in(sender: Any, request: HttpRequest | None, user: Any, **kw: Any) -> None:
    """``user_logged_in``: a session signed in with a temporary password must change it."""
    session = getattr(request, "session", None)
    if session is not None and passwords.must_change_password(user):
        session[MUST_CHANGE] = True


class PasswordChangeRequiredMiddleware:
    """Sends a session that signed in with a temporary password to the change page;
    the change page itself, signing out and static files stay reachable. The API is
    not concerned (a temporary password revokes every token, and issuing a token asks
    for the password)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        session = getattr(request, "session", None)
        if (
            session is not None
            and session.get(MUST_CHANGE)
            and _guarded(request.path)
            and request.user.is_authenticated
        ):
            return redirect("password-change")
        return self.get_response(request)


def _guarded(path: str) -> bool:
    allowed = (reverse("password-change"), reverse("logout"), "/api/", settings.STATIC_URL)
    return not any(path.startswith(prefix) for prefix in allowed)


@login_required
def password_change(request: HttpRequest) -> HttpResponse:
    """Change your own password; you stay signed in here, other sessions end."""
    user = cast(User, request.user)  # login_required
    sso_only = not user.has_usable_password()
    form = PasswordChangeForm(None if sso_only else (request.POST or None))
    if request.method == "POST" and not sso_only and form.is_valid():
        try:
            passwords.password_change(
                user=user,
                old_password=form.cleaned_data["old_password"],
                new_password=form.cleaned_data["new_password"],
            )
        except ValidationError as exc:
            attach_errors(form, exc)
        else:
            user.refresh_from_db()
            update_session_auth_hash(request, user)
            request.session.pop(MUST_CHANGE, None)
            messages.success(request, "Your password is changed; your other sessions ended.")
            return redirect("home")
    return form_page(
        request,
        "frontend/password_change.html",
        {
            "form": form,
            "sso_message": passwords.sso_message(user) if sso_only else "",
            "must_change": bool(request.session.get(MUST_CHANGE)),
        },
    )


class PasswordResetView(auth_views.PasswordResetView):
    """ "Forgot your password?": Django's view (it mails only accounts with a usable
    password, and says the same whether or not one exists)."""

    template_name = "frontend/password_reset.html"
    email_template_name = passwords.RESET_EMAIL_TEMPLATE
    subject_template_name = passwords.RESET_SUBJECT_TEMPLATE

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        return {**super().get_context_data(**kwargs), "sso_name": settings.OIDC_PROVIDER_NAME}


class PasswordResetDoneView(auth_views.PasswordResetDoneView):
    """The reset mail is on its way (if the account exists)."""

    template_name = "frontend/password_reset_done.html"


class PasswordResetConfirmView(auth_views.PasswordResetConfirmView):
    """The link from the mail: choose the new password."""

    template_name = "frontend/password_reset_confirm.html"
    form_class = ResetPasswordForm


class PasswordResetCompleteView(auth_views.PasswordResetCompleteView):
    """The new password is set: sign in with it."""

    template_name = "frontend/password_reset_complete.html"
