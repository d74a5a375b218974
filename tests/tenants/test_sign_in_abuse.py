"""Password guessing: every way of proving a password shares one lockout, keyed on the
username and on the client's address (never on a header the client writes), and every
failed sign-in is audited.

The three doors are the API token endpoint, the dashboard's ``/login/`` and Django's
``/admin/login/``; the lockout lives in the authentication backend, so a failure at
one door counts at the others and so does anything else that calls ``authenticate()``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from django.contrib.auth import authenticate
from django.test import Client
from knox.models import AuthToken

from tenants.models import AuditEvent
from tests.factories import UserFactory

PASSWORD = "correct-horse-battery"
LOCKED_TEXT = "Too many failed sign-ins"
ROOT = Path(__file__).resolve().parents[2]

Attempt = Callable[..., str]


def _api(client: Client, username: str, password: str, **extra: Any) -> str:
    response = client.post(
        "/api/v1/auth/token/",
        json.dumps({"username": username, "password": password}),
        content_type="application/json",
        **extra,
    )
    outcome = {200: "ok", 400: "wrong", 429: "locked"}[response.status_code]
    if outcome == "locked":
        assert int(response["Retry-After"]) > 0
        assert response.json()["error"]["code"] == "throttled"
    return outcome


def _form(path: str) -> Attempt:
    def attempt(client: Client, username: str, password: str, **extra: Any) -> str:
        body = {"username": username, "password": password, "next": "/admin/"}
        response = client.post(path, body, **extra)
        if response.status_code == 302:
            return "ok"
        assert response.status_code == 200, response.status_code
        page = response.content.decode()
        return "locked" if LOCKED_TEXT in page else "wrong"

    return attempt


DOORS: dict[str, Attempt] = {
    "api": _api,
    "login": _form("/login/"),
    "admin": _form("/admin/login/"),
}


@pytest.fixture
def limits(settings: Any) -> Any:
    """Small limits so that a test needs a handful of attempts, not dozens."""
    settings.LOGIN_MAX_FAILURES_PER_USER = 5
    settings.LOGIN_MAX_FAILURES_PER_ADDRESS = 8
    settings.LOGIN_FAILURE_WINDOW_SECONDS = 600
    settings.LOGIN_LOCKOUT_SECONDS = 600
    return settings


@pytest.fixture
def staff(db: Any) -> Any:
    """A platform admin, so that a right password opens the admin door too."""
    return UserFactory(username="root", is_staff=True, is_superuser=True)


def _signed_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


@pytest.mark.parametrize("door", sorted(DOORS))
def test_wrong_passwords_lock_the_account_even_for_the_right_one(
    limits: Any, staff: Any, door: str
) -> None:
    attempt, client = DOORS[door], Client()
    outcomes = [attempt(client, "root", f"guess-{i}") for i in range(5)]
    # The fifth failure is the one that locks; it is already answered as a lockout.
    assert outcomes == ["wrong"] * 4 + ["locked"]
    assert attempt(client, "root", PASSWORD) == "locked"
    assert AuthToken.objects.count() == 0
    assert not _signed_in(client)


@pytest.mark.parametrize("door", sorted(DOORS))
def test_failures_at_one_door_lock_every_door(limits: Any, staff: Any, door: str) -> None:
    others = [name for name in DOORS if name != door]
    for i in range(5):
        DOORS[door](Client(), "root", f"guess-{i}")
    for name in others:
        assert DOORS[name](Client(), "root", PASSWORD) == "locked", name
    # Any other caller of authenticate() is refused too (a management command, a backend
    # added later): the lockout sits in the authentication backend itself.
    assert authenticate(None, username="root", password=PASSWORD) is None


@pytest.mark.parametrize("door", sorted(DOORS))
def test_rotating_addresses_do_not_escape_the_account_lockout(
    limits: Any, staff: Any, door: str
) -> None:
    attempt = DOORS[door]
    for i in range(5):
        attempt(Client(), "root", f"guess-{i}", REMOTE_ADDR=f"198.51.100.{i + 1}")
    assert attempt(Client(), "root", PASSWORD, REMOTE_ADDR="198.51.100.99") == "locked"


@pytest.mark.parametrize("door", sorted(DOORS))
def test_spraying_many_accounts_from_one_address_locks_the_address(
    limits: Any, staff: Any, door: str
) -> None:
    attempt = DOORS[door]
    # One wrong password for each of eight accounts, each with a new X-Forwarded-For:
    # no account reaches its limit, but the address reaches its own.
    outcomes = [
        attempt(
            Client(),
            f"someone-{i}",
            "guess",
            REMOTE_ADDR="203.0.113.5",
            HTTP_X_FORWARDED_FOR=f"10.0.0.{i}",
        )
        for i in range(8)
    ]
    assert outcomes[:7] == ["wrong"] * 7 and outcomes[7] == "locked"
    # Even the right password of an account nobody guessed at, with a fresh header.
    fresh = {"REMOTE_ADDR": "203.0.113.5", "HTTP_X_FORWARDED_FOR": "10.0.0.200"}
    assert attempt(Client(), "root", PASSWORD, **fresh) == "locked"
    # Another address is not affected.
    assert attempt(Client(), "root", PASSWORD, REMOTE_ADDR="203.0.113.6") == "ok"


def test_behind_a_trusted_proxy_the_client_is_the_proxys_entry(limits: Any, staff: Any) -> None:
    limits.TRUSTED_PROXY_COUNT = 1
    proxy = "10.1.0.7"  # every request arrives from the ingress

    def via_proxy(client_ip: str, spoofed: str, username: str, password: str) -> str:
        # The client wrote `spoofed`; the proxy appended the address it saw.
        forwarded = f"{spoofed}, {client_ip}"
        return _api(Client(), username, password, REMOTE_ADDR=proxy, HTTP_X_FORWARDED_FOR=forwarded)

    outcomes = [via_proxy("192.0.2.10", f"10.9.{i}.1", f"someone-{i}", "guess") for i in range(8)]
    assert outcomes[-1] == "locked"
    assert via_proxy("192.0.2.10", "10.9.99.1", "root", PASSWORD) == "locked"
    # A different client behind the same proxy is its own address.
    assert via_proxy("192.0.2.11", "10.9.0.1", "root", PASSWORD) == "ok"


def test_the_api_rate_limit_ignores_a_rotating_forwarded_for(db: Any, monkeypatch: Any) -> None:
    from controlplane.api.throttles import AuthThrottle

    monkeypatch.setattr(AuthThrottle, "THROTTLE_RATES", {"auth": "3/min"})
    outcomes = [
        _api(Client(), f"someone-{i}", "guess", HTTP_X_FORWARDED_FOR=f"10.0.{i}.1")
        for i in range(4)
    ]
    assert outcomes == ["wrong"] * 3 + ["locked"]
    # Changing the header once more does not lift the 429.
    assert _api(Client(), "someone-9", "guess", HTTP_X_FORWARDED_FOR="172.16.0.1") == "locked"


@pytest.mark.parametrize("door", sorted(DOORS))
def test_failed_sign_ins_and_the_lockout_are_audited(limits: Any, staff: Any, door: str) -> None:
    attempt = DOORS[door]
    path = {"api": "/api/v1/auth/token/", "login": "/login/", "admin": "/admin/login/"}[door]
    for i in range(5):
        attempt(Client(), "root", f"secret-guess-{i}", REMOTE_ADDR="192.0.2.44")
    failed = AuditEvent.objects.filter(action="sign_in.failed").order_by("id")
    assert failed.count() == 5
    first = failed.first()
    assert first is not None
    assert first.actor is None and first.actor_name == "anonymous"
    assert first.data == {"username": "root", "address": "192.0.2.44", "path": path}
    assert first.request_id
    locked = AuditEvent.objects.get(action="sign_in.lockout")
    assert locked.data["scope"] == "user" and locked.data["username"] == "root"
    assert locked.data["seconds"] == 600
    # Attempts refused while locked are not checked and add no rows (an attacker cannot
    # grow the audit table faster than the limits allow).
    for _ in range(3):
        attempt(Client(), "root", PASSWORD, REMOTE_ADDR="192.0.2.44")
    assert AuditEvent.objects.filter(action__startswith="sign_in.").count() == 6
    rows = json.dumps(list(AuditEvent.objects.values()), default=str)
    assert "secret-guess" not in rows and PASSWORD not in rows


def test_a_successful_sign_in_restarts_the_accounts_count(limits: Any, staff: Any) -> None:
    for i in range(4):
        assert _api(Client(), "root", f"guess-{i}") == "wrong"
    assert _api(Client(), "root", PASSWORD) == "ok"
    # Four more failures would make eight; the account is not locked.
    assert [_api(Client(), "root", f"again-{i}", REMOTE_ADDR="192.0.2.8") for i in range(4)] == [
        "wrong"
    ] * 4


def test_the_lockout_ends(limits: Any, staff: Any) -> None:
    limits.LOGIN_LOCKOUT_SECONDS = 1
    for i in range(5):
        _api(Client(), "root", f"guess-{i}")
    assert _api(Client(), "root", PASSWORD) == "locked"
    time.sleep(1.2)
    assert _api(Client(), "root", PASSWORD) == "ok"


@pytest.fixture
def redis_cache(settings: Any) -> Iterator[str]:
    """The cache production uses (CACHE_URL): Redis, shared by every process."""
    import os

    url = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": url,
            "KEY_PREFIX": "gangway",
        }
    }
    yield url
    connection = redis.Redis.from_url(url)
    for key in connection.scan_iter("gangway:*login:*"):
        connection.delete(key)


def test_the_lockout_is_shared_between_processes_through_redis(
    db: Any, limits: Any, redis_cache: str
) -> None:
    username = f"victim-{uuid.uuid4().hex[:8]}"
    UserFactory(username=username)
    for i in range(5):
        _api(Client(), username, f"guess-{i}")
    # Another process (another gunicorn worker) configured with CACHE_URL sees the lock.
    code = (
        "import django; django.setup(); from tenants import lockout; "
        f"print(lockout.lockout_for(None, {username!r}))"
    )
    env = {"DATABASE_URL": "sqlite:///:memory:", "CACHE_URL": redis_cache, "PATH": "/usr/bin"}
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**env, "DJANGO_SETTINGS_MODULE": "controlplane.settings"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "scope='user'" in result.stdout, result.stdout
