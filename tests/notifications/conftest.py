"""Notifications' fixtures: a real webhook receiver on loopback, and a cluster to move.

The receiver is an ``http.server`` in a thread; it records every request (headers and
raw body), can be told to answer an error status a few times, and to stall its answer
until released (a worker killed mid-send).
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from celery import current_app

from clusters.models import ClusterRequest
from notifications import signing
from tenants.models import GpuFlavor


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> dict[str, Any]:
        return json.loads(self.body)

    def signed_by(self, secret: str) -> bool:
        return signing.verify(
            secret,
            self.headers["X-Gangway-Timestamp"],
            self.body,
            self.headers["X-Gangway-Signature"],
        )


@dataclass
class Receiver:
    url: str
    received: list[Received] = field(default_factory=list)
    fail_with: list[int] = field(default_factory=list)  # statuses to answer, in turn
    stall: threading.Event | None = None  # set: answer; unset: hold the answer
    arrived: threading.Event = field(default_factory=threading.Event)

    def ids(self) -> list[str]:
        return [r.headers["X-Gangway-Delivery"] for r in self.received]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    state = Receiver(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            state.received.append(Received(dict(self.headers.items()), body))
            state.arrived.set()
            if state.stall is not None:
                state.stall.wait(60)
            code = state.fail_with.pop(0) if state.fail_with else 200
            try:
                self.send_response(code)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")
            except OSError:
                pass  # the sender went away (killed mid-send)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    state.url = f"http://127.0.0.1:{server.server_port}/hooks/T0KEN-in-the-path"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        if state.stall is not None:
            state.stall.set()
        server.shutdown()
        server.server_close()


@pytest.fixture
def fast_notify(settings: Any) -> Any:
    """Small backoff and timeouts; Celery runs tasks inline (retries too)."""
    settings.NOTIFY_BACKOFF_BASE_SECONDS = 0.01
    settings.NOTIFY_BACKOFF_CAP_SECONDS = 0.05
    settings.NOTIFY_WEBHOOK_TIMEOUT_SECONDS = 5.0
    settings.NOTIFY_ALLOW_PRIVATE_WEBHOOKS = True
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    eager = current_app.conf.task_always_eager
    current_app.conf.task_always_eager = True
    yield settings
    current_app.conf.task_always_eager = eager


def make_cluster(
    tenant: Any,
    owner: Any,
    *,
    name: str = "bob-dev",
    state: str = "provisioning",
    workload: str = "cluster",
) -> ClusterRequest:
    """A request row as the services leave it, in ``state``."""
    row: ClusterRequest = ClusterRequest.objects.create(
        tenant=tenant,
        owner=owner,
        name=name,
        workload=workload,
        flavor=GpuFlavor.objects.get(name="l4"),
        kind="dev",
        workers=1,
        gpus=1,
        state=state,
    )
    return row


@dataclass
class MailSink:
    """``python -m notifications.mailsink`` running on loopback, writing to ``directory``."""

    directory: Path
    port: int

    def files(self) -> list[Path]:
        return sorted(self.directory.glob("*.eml"))


@pytest.fixture
def mail_sink(fast_notify: Any, tmp_path: Path) -> Iterator[MailSink]:
    """The real mail sink of make run, as its own process; Django sends it mail over SMTP
    and the Mail page reads its directory."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    sink = MailSink(directory=tmp_path / "mail", port=port)
    where = ["--port", str(port), "--dir", str(sink.directory)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "notifications.mailsink", *where],
        cwd=Path(__file__).resolve().parents[2],
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert proc.poll() is None, "the mail sink exited"
            time.sleep(0.1)
        fast_notify.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
        fast_notify.EMAIL_HOST = "127.0.0.1"
        fast_notify.EMAIL_PORT = port
        fast_notify.EMAIL_USE_TLS = False
        fast_notify.MAIL_SINK_DIR = str(sink.directory)
        yield sink
    finally:
        proc.terminate()
        proc.wait(timeout=30)
