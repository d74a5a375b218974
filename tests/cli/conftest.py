"""Run the real command line as a subprocess against the real stack.

``cli(*args)`` runs ``python -m gangway_cli`` (what the ``gangway`` console script
runs) with its own config directory and ``GANGWAY_SERVER`` pointed at pytest-django's
live server; ``stack`` adds the engine's Celery worker and kubesim
(tests/clusters/engine/conftest.py), so that clusters really go queued -> ready.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.clusters.engine.conftest import kubesim, worker  # noqa: F401  (fixtures)

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "correct-horse-battery"  # tests.factories.UserFactory's


@dataclass
class Run:
    """One finished CLI invocation."""

    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)

    def __str__(self) -> str:
        return f"exit {self.code}\n--- stdout\n{self.out}\n--- stderr\n{self.err}"


@pytest.fixture
def config_home(tmp_path: Path) -> Path:
    return tmp_path / "xdg-config"


@pytest.fixture
def cli(live_server: Any, config_home: Path) -> Callable[..., Run]:
    """``cli(*args, stdin=None, env=None, timeout=120)``: run the CLI, return a :class:`Run`."""

    def run(
        *args: str,
        stdin: str | None = None,
        env: dict[str, str] | None = None,
        timeout: float = 120,
    ) -> Run:
        environment = {
            k: v for k, v in os.environ.items() if not k.startswith(("GANGWAY_", "COLUMNS"))
        }
        environment.update(
            XDG_CONFIG_HOME=str(config_home),
            GANGWAY_SERVER=live_server.url,
            COLUMNS="200",
            **(env or {}),
        )
        done = subprocess.run(
            [sys.executable, "-m", "gangway_cli", *args],
            cwd=ROOT,
            env=environment,
            input=stdin if stdin is not None else "",
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        return Run(done.returncode, done.stdout, done.stderr)

    return run


@pytest.fixture
def login(cli: Callable[..., Run]) -> Callable[[str], Run]:
    """``login(username)``: sign the CLI in as that test user (password on stdin)."""

    def sign_in(username: str) -> Run:
        done = cli("login", "--username", username, "--password-stdin", stdin=PASSWORD + "\n")
        assert done.code == 0, done
        return done

    return sign_in
