"""Production settings: check --deploy is clean, bad settings fail loudly, secrets can
come from files, and the OpenAPI schema validates. Each runs manage.py in a subprocess
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


def test_check_deploy_is_clean_in_production() -> None:
    result = manage(
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
        DEBUG="0",
        SECRET_KEY=LONG_SECRET,
        ALLOWED_HOSTS="gangway.example.com",
    )
    assert result.returncode == 0, result.stderr + result.stdout


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
