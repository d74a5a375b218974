"""Production static files: a server started without ``collectstatic`` (or with a stale
manifest) refuses to start and says why, ``check --deploy`` reports the same, and once
the files are collected gunicorn serves ``/api/docs/`` and its assets.

Everything runs as a deployment would: manage.py and gunicorn in subprocesses with
production settings (``DEBUG=0``, the compressed manifest storage), on loopback.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
PRODUCTION = {
    "DEBUG": "0",
    "SECRET_KEY": "a-production-secret-key-that-is-long-and-random-0123456789abcdefghij",
    "ALLOWED_HOSTS": "gangway.example.com,127.0.0.1",
    "DATABASE_URL": "sqlite:///:memory:",
    "DJANGO_SETTINGS_MODULE": "controlplane.settings",
}


def environment(var_dir: Path, **extra: str) -> dict[str, str]:
    keep = {"PATH", "HOME", "LANG", "TMPDIR", "VIRTUAL_ENV"}
    env = {key: value for key, value in os.environ.items() if key in keep}
    return {**env, **PRODUCTION, "GANGWAY_VAR_DIR": str(var_dir), **extra}


def manage(var_dir: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *args],
        cwd=ROOT,
        env=environment(var_dir, **extra),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.fixture(scope="module")
def collected(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A GANGWAY_VAR_DIR whose static files were collected as the image build does."""
    var_dir = tmp_path_factory.mktemp("collected")
    result = manage(var_dir, "collectstatic", "--noinput", "-v0")
    assert result.returncode == 0, result.stderr
    assert (var_dir / "static" / "staticfiles.json").exists()
    return var_dir


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


Server = tuple[subprocess.Popen[str], str]


@pytest.fixture
def gunicorn() -> Iterator[Callable[[Path], Server]]:
    """``gunicorn(var_dir)`` starts the image's command on a loopback port; stopped after."""
    started: list[subprocess.Popen[str]] = []

    def start(var_dir: Path) -> Server:
        port = free_port()
        process = subprocess.Popen(
            [
                str(BIN / "gunicorn"),
                "controlplane.wsgi:application",
                f"--bind=127.0.0.1:{port}",
                "--workers=1",
            ],
            cwd=ROOT,
            env=environment(var_dir, SECURE_SSL_REDIRECT="0"),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        started.append(process)
        return process, f"http://127.0.0.1:{port}"

    yield start
    for process in started:
        if process.poll() is None:
            process.terminate()
            process.wait(timeout=30)


def test_check_deploy_reports_static_files_not_collected(tmp_path: Path) -> None:
    result = manage(tmp_path, "check", "--deploy")
    assert result.returncode != 0
    assert "gangway.E001" in result.stderr
    assert "collectstatic --noinput" in result.stderr


def test_check_deploy_reports_a_manifest_older_than_the_code(
    collected: Path, tmp_path: Path
) -> None:
    manifest = json.loads((collected / "static" / "staticfiles.json").read_text())
    del manifest["paths"]["frontend/js/gangway.js"]
    (tmp_path / "static").mkdir()
    (tmp_path / "static" / "staticfiles.json").write_text(json.dumps(manifest))
    result = manage(tmp_path, "check", "--deploy")
    assert result.returncode != 0
    assert "gangway.E002" in result.stderr
    assert "frontend/js/gangway.js" in result.stderr


def test_check_deploy_reports_a_corrupt_manifest(tmp_path: Path) -> None:
    (tmp_path / "static").mkdir()
    (tmp_path / "static" / "staticfiles.json").write_text("{half a manifest")
    result = manage(tmp_path, "check", "--deploy")
    assert result.returncode != 0
    assert "gangway.E003" in result.stderr


def test_check_deploy_is_clean_in_production(collected: Path) -> None:
    result = manage(
        collected,
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
        CACHE_URL="redis://redis.example.internal:6379/1",
    )
    assert result.returncode == 0, result.stderr + result.stdout


def test_commands_without_static_files_still_run(tmp_path: Path) -> None:
    # The migration Job, the worker (it runs the default checks) and collectstatic itself
    # (the `collected` fixture) need no static files: only --deploy and servers look.
    for command in (["check"], ["migrate", "--plan"]):
        result = manage(tmp_path, *command)
        assert result.returncode == 0, result.stderr


def test_a_web_server_without_collected_static_refuses_to_start(
    tmp_path: Path, gunicorn: Callable[[Path], Server]
) -> None:
    process, base = gunicorn(tmp_path)
    try:
        output, _ = process.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        status, _ = get(f"{base}/api/docs/")
        pytest.fail(f"gunicorn started without collected static files; /api/docs/: {status}")
    assert process.returncode != 0
    assert "The static files have not been collected" in output
    assert "collectstatic --noinput" in output


def test_a_web_server_with_collected_static_serves_the_api_docs(
    collected: Path, gunicorn: Callable[[Path], Server]
) -> None:
    process, base = gunicorn(collected)
    deadline = time.monotonic() + 60
    while True:
        assert process.poll() is None, process.communicate()[0]
        try:
            if get(f"{base}/healthz")[0] == 200:
                break
        except OSError:
            pass
        assert time.monotonic() < deadline, "gunicorn did not answer /healthz in 60 s"
        time.sleep(0.2)
    status, body = get(f"{base}/api/docs/")
    assert status == 200
    # The page names the manifest's hashed files, and WhiteNoise serves them.
    css = re.search(
        r'"(/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui\.\w{12}\.css)"',
        body.decode(),
    )
    assert css, body[:500]
    assert get(base + css.group(1))[0] == 200


def test_the_wsgi_module_imports_every_view_before_the_first_request(collected: Path) -> None:
    # Django loads the URLconf in the first request that resolves a path; a gunicorn worker
    # loads it while it boots instead, so no user's request pays for the import.
    probe = (
        "import sys, controlplane.wsgi; "
        "print(sorted(m for m in ('controlplane.urls', 'clusters.api.views') if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=ROOT,
        env=environment(collected),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[-2] == "['clusters.api.views', 'controlplane.urls']"
