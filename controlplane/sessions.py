"""The session store: Django's database sessions, for well-formed session keys only.

A session cookie is client input. Django looks any key of eight characters or more up
in the database, so a cookie holding a NUL byte (``sessionid="abcdefgh\\000"`` is valid
cookie syntax) made PostgreSQL fail the query: a 500 on every page and API call. Django
makes keys of lowercase letters and digits; anything else is no session at all.
"""

from __future__ import annotations

import re
from typing import Any

from django.contrib.sessions.backends.db import SessionStore as DatabaseSessionStore

_KEY = re.compile(r"[a-z0-9]{8,40}")


class SessionStore(DatabaseSessionStore):
    """Database sessions that ignore a malformed session key."""

    def _validate_session_key(self, key: Any) -> bool:
        return isinstance(key, str) and _KEY.fullmatch(key) is not None
