"""Ctrl-C while ``gangway up`` waits: in a terminal it asks whether to keep the request
(answering no deletes it); without a terminal (a script) it keeps it and says how to
delete it. Either way the exit code is 130, as for any interrupted command.

The CLI runs as a subprocess against the live server with no worker, so the request
stays queued for as long as the test needs; the interactive case gives it a real
pseudo-terminal (``pty``), so that it sees a TTY on stdin exactly as in a shell.
"""

from __future__ import annotations

import os
import pty
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from clusters.models import ClusterRequest
from gangway_cli import exitcodes
from tests.cli.conftest import ROOT

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def quiet(monkeypatch: Any) -> None:
    """No worker: the request stays queued (the services' nudges are dropped)."""
    from clusters.rows import enqueue

    monkeypatch.setattr(enqueue, "send", lambda *a, **k: None)


def _environment(live_server: Any, config_home: Path) -> dict[str, str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("GANGWAY_")}
    environment.update(
        XDG_CONFIG_HOME=str(config_home), GANGWAY_SERVER=live_server.url, COLUMNS="200"
    )
    return environment


def _default_sigint() -> None:
    # A process started with SIGINT ignored (as under some test runners) would never
    # see Ctrl-C; a shell gives its commands the default disposition.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


_ESCAPES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _read_until(fd: int, words: str, timeout: float = 60) -> str:
    """What ``fd`` gave until ``words`` appeared in it (terminal escapes removed)."""
    seen = ""
    deadline = time.monotonic() + timeout
    while words not in seen:
        left = deadline - time.monotonic()
        assert left > 0, f"never printed {words!r}:\n{seen[-2000:]}"
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # the terminal closed: the process has ended
                break
            if not chunk:
                break
            seen = _ESCAPES.sub("", seen + chunk.decode(errors="replace"))
    assert words in seen, seen[-2000:]
    return seen


def test_in_a_terminal_ctrl_c_asks_and_no_deletes_the_request(
    cli: Any, login: Any, bob: Any, live_server: Any, config_home: Path, quiet: None
) -> None:
    login("bob")
    main, terminal = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "gangway_cli", "up", "ctrl-c", "--flavor", "l4"],
        cwd=ROOT,
        env=_environment(live_server, config_home),
        stdin=terminal,
        stdout=terminal,
        stderr=terminal,
        preexec_fn=_default_sigint,
        close_fds=True,
    )
    os.close(terminal)
    try:
        _read_until(main, "Requested ctrl-c")
        time.sleep(1)  # well into the wait
        assert ClusterRequest.objects.unscoped().filter(name="ctrl-c").exists()
        process.send_signal(signal.SIGINT)
        _read_until(main, "Keep the request in the queue?")
        os.write(main, b"n\n")
        _read_until(main, "Deleted the request 'ctrl-c'")
        assert process.wait(timeout=30) == exitcodes.INTERRUPTED
    finally:
        if process.poll() is None:
            process.kill()
        os.close(main)
    assert cli("status", "ctrl-c").code in (exitcodes.NOT_FOUND, exitcodes.OK)
    request = ClusterRequest.objects.unscoped().filter(name="ctrl-c").first()
    assert request is None or request.state in ("deleting", "deleted"), request


def test_in_a_script_ctrl_c_keeps_the_request_and_says_how_to_delete_it(
    login: Any, bob: Any, live_server: Any, config_home: Path, quiet: None
) -> None:
    login("bob")
    process = subprocess.Popen(
        [sys.executable, "-m", "gangway_cli", "up", "kept", "--flavor", "l4"],
        cwd=ROOT,
        env=_environment(live_server, config_home),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=_default_sigint,
    )
    try:
        assert process.stderr is not None
        before = _read_until(process.stderr.fileno(), "Requested kept")
        time.sleep(1)  # well into the wait
        process.send_signal(signal.SIGINT)
        _out, after = process.communicate(timeout=30)
        err = before + after.decode()
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == exitcodes.INTERRUPTED
    assert "Kept 'kept'" in err and "gangway down kept" in err, err[-2000:]
    request = ClusterRequest.objects.unscoped().get(name="kept")
    assert request.state not in ("deleting", "deleted")
