"""The CLI without a server to talk to: packaging, usage errors, no sign-in, an
unreachable server and the completion scripts (subprocesses, no database)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from gangway_cli import exitcodes

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str, config: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("GANGWAY_")}
    environment.update(XDG_CONFIG_HOME=str(config), **env)
    return subprocess.run(
        [sys.executable, "-m", "gangway_cli", *args],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        stdin=subprocess.DEVNULL,
    )


def test_the_console_script_is_declared() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["project"]["scripts"]["gangway"] == "gangway_cli.main:main"
    assert project["tool"]["setuptools"]["packages"]["find"]["include"] == [
        "gangway_cli",
        "gangway_cli.*",
    ]


def test_help_usage_errors_and_no_sign_in(tmp_path: Path) -> None:
    assert run("--help", config=tmp_path).returncode == 0
    bad = run("up", "--workers", "many", config=tmp_path)
    assert bad.returncode == exitcodes.USAGE and "workers" in bad.stderr
    nobody = run("ls", config=tmp_path)
    assert nobody.returncode == exitcodes.AUTH
    assert "no gangway server chosen" in nobody.stderr and "gangway login" in nobody.stderr


def test_an_unreachable_server_is_named_with_how_to_change_it(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    done = run(
        "ls",
        "-o",
        "json",
        config=tmp_path,
        GANGWAY_SERVER=f"http://127.0.0.1:{port}",
        GANGWAY_TOKEN="abc",
    )
    assert done.returncode == exitcodes.UNREACHABLE, done.stderr
    assert f"http://127.0.0.1:{port}" in done.stderr and "GANGWAY_SERVER" in done.stderr
    assert '"code": "cli_error"' in done.stdout  # -o json: a parseable error on stdout


@pytest.mark.parametrize("shell", ["bash", "zsh"])
def test_completion_scripts(tmp_path: Path, shell: str) -> None:
    done = run("completion", shell, config=tmp_path)
    assert done.returncode == 0
    assert "_GANGWAY_COMPLETE" in done.stdout and "gangway" in done.stdout
