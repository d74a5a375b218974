"""Sign-in lockout: failed password checks counted per username and per client address.

Both counts matter. Per username, because an attacker spreading guesses for one
account over many addresses must still be stopped; per address, because one client
trying one password on many accounts ("spraying") never trips any account's limit.
``LOGIN_MAX_FAILURES_PER_USER`` (or ``..._PER_ADDRESS``) failures within
``LOGIN_FAILURE_WINDOW_SECONDS`` lock that username (or address) for
``LOGIN_LOCKOUT_SECONDS``; while locked, even the right password is refused without
being checked, so a lockout teaches an attacker nothing.

The counters live in Django's cache (shared through Redis when ``CACHE_URL`` is set).
A successful sign-in restarts the username's count, not the address's: otherwise an
attacker holding one valid account could keep resetting the count of their address.
Under a burst of concurrent guesses a few may be checked past the limit before the
lock is written; the lock then holds for all of them.

The failure count is driven by Django's ``user_login_failed`` signal, which fires when
every backend refused the credentials, whichever view asked.
"""

from __future__ import annotations

import hashlib
import logging
import math
import time
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.cache import cache

from controlplane.addresses import address_bucket, client_address
from tenants import services

logger = logging.getLogger(__name__)

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


def on_login_failed(
    sender: Any, credentials: dict[str, Any], request: Any = None, **_: Any
) -> None:
    """``user_login_failed`` receiver: count the failure and audit it.

    An attempt refused because a lockout was already in force was never checked: it
    is logged but neither counted nor audited, so a flood of them cannot grow the
    audit table faster than the limits allow.
    """
    if "password" not in credentials:
        return  # some other kind of credential: not a password check
    username = str(credentials.get(get_user_model().USERNAME_FIELD) or "")
    address = client_address(request) if request is not None else ""
    if lockout_for(request, username) is not None:
        logger.warning(
            "sign-in refused while locked out: username=%r address=%s", username, address
        )
        return
    started = failure_record(request, username)
    services.sign_in_failure_record(
        username=username,
        address=address,
        path=getattr(request, "path", ""),
        lockouts=started,
    )
    logger.info("sign-in failed: username=%r address=%s", username, address)
