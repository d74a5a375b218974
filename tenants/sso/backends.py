"""The authentication backend of sessions that single sign-on began.

Django restores a session's user through the backend that signed it in, and only if
that backend is listed in ``AUTHENTICATION_BACKENDS``. Single sign-on proves no password,
so this backend checks none: ``authenticate()`` never succeeds, and ``get_user()`` is the
model backend's (an inactive user's session ends at its next request).
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.backends import ModelBackend


class SsoBackend(ModelBackend):
    """Restores single sign-on sessions; signs nobody in by password."""

    def authenticate(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        return None
