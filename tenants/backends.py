"""The authentication backend: Django's model backend behind the sign-in lockout.

It is the only entry of ``AUTHENTICATION_BACKENDS``, so every way of proving a
password - the API's token endpoint, the dashboard's ``/login/``, Django's
``/admin/login/`` and any future caller of ``authenticate()`` - passes the same
lockout check. Failures are counted by :func:`tenants.signals.on_login_failed`.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.core.exceptions import PermissionDenied

from tenants import lockout


class LockedOut(PermissionDenied):
    """Raised to ``authenticate()``, which then stops asking backends and reports a
    failure; callers learn why from :func:`tenants.lockout.lockout_for`."""


class LockoutModelBackend(ModelBackend):
    """Refuses every password check while the username or the client's address is
    locked out, without looking at the password; otherwise Django's model backend."""

    def authenticate(
        self,
        request: Any,
        username: str | None = None,
        password: str | None = None,
        **kwargs: Any,
    ) -> Any:
        if username is None:
            username = kwargs.get(get_user_model().USERNAME_FIELD)
        if username is None or password is None:
            return None
        if lockout.lockout_for(request, str(username)) is not None:
            raise LockedOut
        user = super().authenticate(request, username=username, password=password, **kwargs)
        if user is not None:
            lockout.failures_clear(str(username))
        return user

    async def aauthenticate(
        self,
        request: Any,
        username: str | None = None,
        password: str | None = None,
        **kwargs: Any,
    ) -> Any:
        # ModelBackend has its own async path; route it through the same check.
        return await sync_to_async(self.authenticate)(
            request, username=username, password=password, **kwargs
        )
