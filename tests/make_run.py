"""Drive ``make run`` (scripts/run.py) from tests, as a newcomer would run it.

:class:`MakeRun` starts the orchestrator in a temporary var/ with an environment that
has none of the suite's PostgreSQL or Redis settings (so it runs the embedded default:
SQLite, the embedded broker, kubesim), reads its console as it goes, finds its children
and stops it with Ctrl-C. The HTTP helpers talk to its API with a token.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubesim import localproc

ROOT = Path(__file__).resolve().parent.parent
# What make run inherits from a newcomer's shell; nothing of the suite's configuration.
_INHERITED = {"PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "VIRTUAL_ENV", "TERM"}
_CHILD_MARKERS = {
    "kubesim": "fleets/demo.yaml",
    "kubesim-cloud": "fleets/cloud.yaml",
    "worker": " worker ",
    "beat": " beat ",
    "web": "uvicorn",
    "mail": "-m notifications.mailsink",
    "webhooks": "-m notifications.webhook_sink",
}


def free_port(span: int = 1) -> int:
    """A loopback port, and the ``span - 1`` after it, free now and below the kernel's
    ephemeral range (``kubesim.localproc.free_port`` says why)."""
    return localproc.free_port(span=span)


def port_served(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def http(
    method: str, url: str, body: dict[str, Any] | None = None, token: str = ""
) -> tuple[int, Any]:
    """(status, parsed JSON or text) of one request; an error status is returned, not raised."""
    request = urllib.request.Request(
        url,
        method=method,
        data=json.dumps(body).encode() if body is not None else None,
        headers={
            "Content-Type": "application/json",
            **({"Authorization": f"Token {token}"} if token else {}),
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            status, raw = response.status, response.read()
    except urllib.error.HTTPError as exc:
        status, raw = exc.code, exc.read()
    text = raw.decode()
    try:
        return status, json.loads(text) if text else None
    except json.JSONDecodeError:
        return status, text


def until(predicate: Callable[[], Any], timeout: float, what: str) -> Any:
    """Poll ``predicate`` (connection errors count as "not yet") until it is truthy."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            result = predicate()
        except OSError:
            result = None
        if result:
            return result
        time.sleep(0.3)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


def tree_changes() -> set[str]:
    """Paths ``git status`` reports in the checkout, outside var/ (where make run writes)."""
    out = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {line[3:] for line in out.splitlines() if not line[3:].startswith("var/")}


class MakeRun:
    """scripts/run.py running in ``tmp_path/var`` on free ports (kubesim's via KUBE_PORT)."""

    def __init__(self, tmp_path: Path, *, background: bool = False, **env: str) -> None:
        """``background``: started as a shell starts ``make run &``, with SIGINT ignored."""
        # PORT+1 is the Ray dashboards' origin (scripts/run.py).
        self.port, self.kube_port = free_port(span=2), free_port()
        self.cloud_kube_port = free_port()
        # The mail sink's and the demo receiver's ports too: PORT+4 and PORT+5 may be taken.
        self.mail_port = int(env.get("MAIL_PORT") or free_port())
        self.webhook_port = int(env.get("WEBHOOK_PORT") or free_port())
        self.var = tmp_path / "var"
        self.url = f"http://127.0.0.1:{self.port}"
        self.api = f"{self.url}/api/v1"
        self._lines: list[str] = []
        base = {key: value for key, value in os.environ.items() if key in _INHERITED}
        env = {
            **base,
            "GANGWAY_VAR_DIR": str(self.var),
            "KUBE_PORT": str(self.kube_port),
            "CLOUD_KUBE_PORT": str(self.cloud_kube_port),
            "MAIL_PORT": str(self.mail_port),
            "WEBHOOK_PORT": str(self.webhook_port),
            # Clusters stay simulated unless a test asks for real Ray.
            "REAL_RAY": "0",
            **env,
        }
        self.proc = subprocess.Popen(
            [sys.executable, "scripts/run.py", "--port", str(self.port), "--startup-delay", "0.5"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            preexec_fn=(lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
            if background
            else None,
        )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            self._lines.append(raw.decode(errors="replace"))

    @property
    def output(self) -> str:
        return "".join(self._lines)

    def wait_serving(self, timeout: float = 180) -> None:
        until(lambda: http("GET", f"{self.url}/healthz")[0] == 200, timeout, "the web server")

    def children(self) -> dict[str, int]:
        """The live children of make run by role (kubesim, worker, beat, web, rayweb, and
        the mail and webhook sinks)."""
        found: dict[str, int] = {}
        pids = subprocess.run(
            ["pgrep", "-P", str(self.proc.pid)], capture_output=True, text=True
        ).stdout.split()
        for pid in pids:
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except FileNotFoundError:
                continue
            # The Ray dashboards' web server is a runserver too, on the next port.
            if f" --port {self.port + 1} " in f" {cmdline} ":
                found["rayweb"] = int(pid)
                continue
            for role, marker in _CHILD_MARKERS.items():
                if marker in f" {cmdline} ":
                    found[role] = int(pid)
        return found

    def login(self, username: str) -> str:
        status, body = http(
            "POST", f"{self.api}/auth/token/", {"username": username, "password": "gangway-demo"}
        )
        assert status == 200, body
        return str(body["token"])

    def cluster(self, tenant: str, name: str, token: str) -> dict[str, Any] | None:
        status, body = http("GET", f"{self.api}/tenants/{tenant}/clusters/{name}/", token=token)
        return body if status == 200 else None

    def stop(self) -> int:
        """Ctrl-C, as a newcomer would; returns make run's exit code. If make run does
        not stop, it and its children are killed (nothing outlives the test) and the
        test fails."""
        children = self.children()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            return self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            for pid in [self.proc.pid, *children.values()]:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            raise

    def logs(self) -> dict[str, str]:
        return {log.stem: log.read_text(errors="replace") for log in self.var.glob("*.log")}
