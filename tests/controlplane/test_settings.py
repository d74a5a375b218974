"""Production settings: bad settings fail loudly, secrets can come from files, and the
OpenAPI schema validates (check --deploy is in test_static_manifest.py, which collects the
static files it needs first). Each runs manage.py in a subprocess
with a controlled environment, as a deployment would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LONG_SECRET = "a-production-secret-key-that-is-long-and-random-0123456789abcdefghij"


def manage(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {
        key: value
        for key, value in os.environ.items()
        if key in {"PATH", "HOME", "LANG", "TMPDIR", "VIRTUAL_ENV"}
    }
    base.update(
        {"DATABASE_URL": "sqlite:///:memory:", "DJANGO_SETTINGS_MODULE": "controlplane.settings"}
    )
    base.update(env)
    return subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *args],
        cwd=ROOT,
        env=base,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_production_without_a_shared_cache_is_warned_about() -> None:
    # Lockouts and throttles counted per gunicorn worker would multiply every limit.
    result = manage(
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
        DEBUG="0",
        SECRET_KEY=LONG_SECRET,
        ALLOWED_HOSTS="gangway.example.com",
    )
    assert result.returncode != 0
    assert "gangway.W001" in result.stderr and "CACHE_URL" in result.stderr


def test_cache_url_selects_redis_and_anything_else_fails_loudly() -> None:
    code = "from django.conf import settings; print(settings.CACHES['default']['BACKEND'])"
    shared = manage("shell", "-c", code, CACHE_URL="redis://:pw@redis.example.internal:6379/1")
    assert shared.returncode == 0, shared.stderr
    assert shared.stdout.strip().endswith("\ncontrolplane.cache.RedisCache")
    local = manage("shell", "-c", code)
    assert local.stdout.strip().endswith("django.core.cache.backends.locmem.LocMemCache")
    bad = manage("check", CACHE_URL="memcached://user:secret@cache:11211")
    assert bad.returncode != 0
    assert "CACHE_URL must be a redis://" in bad.stderr and "secret" not in bad.stderr


def test_trusted_proxy_count_must_be_a_count() -> None:
    result = manage("check", TRUSTED_PROXY_COUNT="-1")
    assert result.returncode != 0
    assert "TRUSTED_PROXY_COUNT=-1 must be at least 0" in result.stderr


def test_missing_secret_key_in_production_fails_loudly() -> None:
    result = manage("check", DEBUG="0", ALLOWED_HOSTS="gangway.example.com")
    assert result.returncode != 0
    assert "SECRET_KEY must be set" in result.stderr


def test_malformed_debug_fails_loudly() -> None:
    result = manage("check", DEBUG="maybe")
    assert result.returncode != 0
    assert "DEBUG='maybe' is not a boolean" in result.stderr


def test_secret_key_file_is_read(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text(LONG_SECRET + "\n")
    result = manage(
        "shell",
        "-c",
        "from django.conf import settings; print(settings.SECRET_KEY)",
        DEBUG="0",
        SECRET_KEY_FILE=str(secret),
        ALLOWED_HOSTS="gangway.example.com",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == LONG_SECRET


def test_openapi_schema_validates_without_warnings() -> None:
    result = manage("spectacular", "--validate", "--fail-on-warn", "--file", "/dev/null", DEBUG="1")
    assert result.returncode == 0, result.stderr + result.stdout


def test_a_tenant_namespace_prefix_that_is_not_a_label_start_fails_loudly() -> None:
    for prefix in ("kube-", "Team-", "-gw", "a" * 24):
        result = manage("check", TENANT_NAMESPACE_PREFIX=prefix)
        assert result.returncode != 0, prefix
        assert f"TENANT_NAMESPACE_PREFIX={prefix!r} must be" in result.stderr, prefix
    assert manage("check", TENANT_NAMESPACE_PREFIX="team-").returncode == 0


def test_metrics_token_file_is_read_and_a_short_token_refused(tmp_path: Path) -> None:
    token = tmp_path / "metrics-token"
    token.write_text("a-metrics-token-from-a-mounted-secret\n")
    show = "from django.conf import settings; print(settings.METRICS_TOKEN)"
    result = manage("shell", "-c", show, METRICS_TOKEN_FILE=str(token))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "a-metrics-token-from-a-mounted-secret"
    result = manage("shell", "-c", show, METRICS_TOKEN="short")
    assert result.returncode != 0
    assert "METRICS_TOKEN must be at least 16 characters" in result.stderr


def test_the_default_broker_is_the_embedded_sqlite_one_under_var(tmp_path: Path) -> None:
    result = manage(
        "shell",
        "-c",
        "from controlplane.celery import app; c = app.connection_for_write(); "
        "print(type(c.transport).__module__, c.transport.client.hostname)",
        GANGWAY_VAR_DIR=str(tmp_path),
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[-2:] == [
        "controlplane.embedded_broker",
        f"sqlite:///{tmp_path / 'broker.sqlite3'}",
    ]


def test_the_filesystem_broker_is_refused_saying_why() -> None:
    result = manage("check", CELERY_BROKER_URL="filesystem://")
    assert result.returncode != 0
    assert "half-written message" in result.stderr
