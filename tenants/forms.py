"""The sign-in forms of the dashboard and of Django's admin.

Both only word the lockout: the backend (:mod:`tenants.backends`) already refused the
sign-in; these forms tell the person why and for how long, instead of repeating
"wrong password" to someone who may have typed the right one.
"""

from __future__ import annotations

from typing import Any

from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import ValidationError

from tenants import lockout


class LockoutMessage(AuthenticationForm):
    """Replaces the invalid-login error by the lockout's message while one is in force.

    Put it before the sign-in form it words: ``AuthenticationForm`` itself, or Django
    admin's subclass of it.
    """

    def clean(self) -> dict[str, Any]:
        try:
            return super().clean()
        except ValidationError as error:
            username = str(self.cleaned_data.get("username") or "")
            locked = lockout.lockout_for(self.request, username)
            if locked is None:
                raise
            raise ValidationError(locked.message, code="locked_out") from error


class SignInForm(LockoutMessage, AuthenticationForm):
    """The dashboard's ``/login/`` form."""

    error_messages = {
        **AuthenticationForm.error_messages,
        "invalid_login": "Your username and password did not match.",
    }


class AdminSignInForm(LockoutMessage, AdminAuthenticationForm):
    """Django admin's ``/admin/login/`` form."""
