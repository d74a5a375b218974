"""The dashboard's password forms. They parse and match the two typings of a new
password; every rule (the old password, Django's validators, single sign-on accounts)
is :mod:`tenants.services.passwords`', whose errors come back on these fields."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth.forms import SetPasswordForm
from django.contrib.auth.password_validation import password_validators_help_texts

from tenants.services import passwords

_NEW_HELP = " ".join(password_validators_help_texts())


def _password(label: str, autocomplete: str, **kwargs: Any) -> forms.CharField:
    return forms.CharField(
        label=label,
        strip=False,
        widget=forms.PasswordInput(attrs={"autocomplete": autocomplete}),
        **kwargs,
    )


class PasswordChangeForm(forms.Form):
    """Your own password: the old one, and the new one twice."""

    old_password = _password("Old password", "current-password")
    new_password = _password("New password", "new-password", help_text=_NEW_HELP)
    new_password2 = _password("New password again", "new-password")

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("new_password") != data.get("new_password2"):
            self.add_error("new_password2", "The two new passwords differ.")
        return data


class ResetPasswordForm(SetPasswordForm):  # type: ignore[type-arg]
    """The end of a reset by email (Django's view checks the link): the new password is
    stored by :func:`tenants.services.passwords.password_reset_complete`, which audits it."""

    def save(self, commit: bool = True) -> Any:
        passwords.password_reset_complete(
            user=self.user, new_password=self.cleaned_data["new_password1"]
        )
        return self.user
