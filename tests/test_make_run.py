"""`make run`'s orchestrator on a machine without servers: SQLite, the filesystem broker,
kubesim, a worker, beat and the web server. A newcomer's request becomes a ready Ray
cluster, and Ctrl-C stops every process it started."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _call(method: str, url: str, body: dict[str, Any] | None = None, token: str = "") -> Any:
    request = urllib.request.Request(
        url,
        method=method,
        data=json.dumps(body).encode() if body is not None else None,
        headers={
            "Content-Type": "application/json",
            **({"Authorization": f"Token {token}"} if token else {}),
        },
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def _until(predicate: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            result = predicate()
        except OSError:
            result = None
        if result:
            return result
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


def test_make_run_serves_a_ready_cluster_and_ctrl_c_stops_everything(tmp_path: Path) -> None:
    port, kube_port = _free_port(), _free_port()
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"DATABASE_URL", "CELERY_BROKER_URL", "KUBECONFIG", "DJANGO_SETTINGS_MODULE"}
    }
    env["GANGWAY_VAR_DIR"] = str(tmp_path / "var")
    run = subprocess.Popen(
        [
            sys.executable,
            "scripts/run.py",
            "--port",
            str(port),
            "--kube-port",
            str(kube_port),
            "--startup-delay",
            "0.5",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    api = f"http://127.0.0.1:{port}/api/v1"
    try:
        _until(lambda: _call("GET", f"http://127.0.0.1:{port}/healthz"), 90, "the web server")
        token = _call(
            "POST", f"{api}/auth/token/", {"username": "eli", "password": "gangway-demo"}
        )["token"]
        created = _call(
            "POST",
            f"{api}/tenants/vision/clusters/",
            {"name": "first", "kind": "dev", "flavor": "l4", "workers": 1},
            token,
        )
        assert created["state"] == "queued"
        started = time.monotonic()
        ready = _until(
            lambda: (
                (c := _call("GET", f"{api}/tenants/vision/clusters/first/", token=token))
                and c["state"] == "ready"
                and c
            ),
            60,
            "the cluster to be ready",
        )
        print(f"ready {time.monotonic() - started:.1f} s after the request")
        assert ready["endpoints"]["client_address"] == "ray://first-head-svc.gw-vision.svc:10001"
        children = subprocess.run(
            ["pgrep", "-P", str(run.pid)], capture_output=True, text=True
        ).stdout.split()
        assert len(children) == 4, children  # kubesim, worker, beat, web
    finally:
        run.send_signal(signal.SIGINT)
        output = run.communicate(timeout=30)[0].decode()
    assert run.returncode is not None
    assert "gangway-demo" in output  # the logins were printed
    for busy in (port, kube_port):
        with socket.socket() as sock:
            assert sock.connect_ex(("127.0.0.1", busy)) != 0, f"port {busy} still served"
    alive = []
    for pid in children:
        try:
            os.kill(int(pid), 0)
            alive.append(pid)
        except ProcessLookupError:
            pass
    assert alive == [], f"processes left running: {alive}"
