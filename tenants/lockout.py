"""Sign-in lockout: failed password checks counted per username and per client address.

Per username, so that guesses for one account spread over many addresses are stopped;
per address, so that one client trying one password on many accounts is stopped too.
Too many failures within ``LOGIN_FAILURE_WINDOW_SECONDS`` lock the username (or
address) for ``LOGIN_LOCKOUT_SECONDS``; while locked, even the right password is refused
unchecked, so a lockout teaches an attacker nothing. The counters live in Django's cache
(Redis when ``CACHE_URL`` is set). A right password restarts the username's count, not
the address's, or one valid account could keep resetting its address's count.
"""

from __future__ import annotations

import hashlib
import math
import time
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.cache import cache

from controlplane.addresses import address_bucket, client_address

USER = "user"
ADDRESS = "address"


@dataclass(frozen=True)
class Lockout:
    """An active lockout: what is locked (``user`` or ``address``) and for how long."""

    scope: str
    seconds: int

    @property
    def message(self) -> str:
        """What the person signing in is told (a form error or the API's 429)."""
        minutes = max(1, math.ceil(self.seconds / 60))
        unit = "minute" if minutes == 1 else "minutes"
        return f"Too many failed sign-ins. Try again in {minutes} {unit}."


def _username_key(username: str) -> str:
    # Hashed: a username is arbitrary text and cache keys are not.
    digest = hashlib.sha256(username.casefold().encode()).hexdigest()[:32]
    return f"login:{USER}:{digest}"


def _subjects(request: Any, username: str) -> list[tuple[str, str, int]]:
    """(scope, cache key, limit) for each count this attempt belongs to."""
    subjects = [(USER, _username_key(username), settings.LOGIN_MAX_FAILURES_PER_USER)]
    if request is not None:
        bucket = address_bucket(client_address(request))
        if bucket:
            subjects.append(
                (ADDRESS, f"login:{ADDRESS}:{bucket}", settings.LOGIN_MAX_FAILURES_PER_ADDRESS)
            )
    return subjects


def lockout_for(request: Any, username: str) -> Lockout | None:
    """The longest lockout in force for this username or the request's address.

    ``request`` may be ``None`` (``authenticate()`` called outside a request): then
    only the username counts.
    """
    subjects = _subjects(request, username)
    until = cache.get_many([f"{key}:locked" for _, key, _ in subjects])
    now = time.time()
    active = [
        Lockout(scope=scope, seconds=math.ceil(until[f"{key}:locked"] - now))
        for scope, key, _ in subjects
        if until.get(f"{key}:locked", 0) > now
    ]
    return max(active, key=lambda lock: lock.seconds, default=None)


def _count(key: str) -> int:
    window = settings.LOGIN_FAILURE_WINDOW_SECONDS
    cache.add(key, 0, timeout=window)  # the window starts at the first failure
    try:
        return cache.incr(key)
    except ValueError:  # the window ended between add and incr
        cache.set(key, 1, timeout=window)
        return 1


def failure_record(request: Any, username: str) -> list[Lockout]:
    """Count one failed password check; returns the lockouts it started, if any."""
    started = []
    for scope, key, limit in _subjects(request, username):
        if _count(key) < limit:
            continue
        seconds = settings.LOGIN_LOCKOUT_SECONDS
        cache.set(f"{key}:locked", time.time() + seconds, timeout=seconds)
        # The next window starts after the lockout, with a clean count.
        cache.delete(key)
        started.append(Lockout(scope=scope, seconds=seconds))
    return started


def failures_clear(username: str) -> None:
    """A right password: the username's failures so far no longer count."""
    cache.delete(_username_key(username))
