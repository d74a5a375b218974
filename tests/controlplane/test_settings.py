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
