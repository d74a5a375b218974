"""`make run`'s orchestrator (scripts/run.py) on a machine without servers: SQLite, the
embedded broker, kubesim, a worker, beat and the web server. A newcomer's request becomes
a ready Ray cluster; a child that dies is restarted with a line on the console, and one
that cannot stay up stops the whole; pages are served without DEBUG; nothing is written
outside var/; Ctrl-C stops every process it started."""

from __future__ import annotations

import argparse
import email
import email.message
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from scripts import run
from tests.make_run import MakeRun, http, port_served, tree_changes, until


def _ready(stack: MakeRun, name: str, token: str, flavor: str = "l4") -> dict[str, Any]:
    status, created = http(
        "POST",
        f"{stack.api}/tenants/vision/clusters/",
        {"name": name, "kind": "dev", "flavor": flavor, "workers": 1},
        token,
    )
    assert status == 201, created
    assert created["state"] == "queued"
    return dict(
        until(
            lambda: (c := stack.cluster("vision", name, token)) and c["state"] == "ready" and c,
            120,
            f"{name} to be ready",
        )
    )


@pytest.mark.slow
def test_make_run_serves_clusters_survives_a_killed_worker_and_ctrl_c_stops_it(
    tmp_path: Path,
) -> None:
    changed_before = tree_changes()
    # Started as `make run &` would be: SIGINT ignored, yet Ctrl-C must still stop it.
    stack = MakeRun(tmp_path, background=True)
    try:
        stack.wait_serving()
        status, ready = http("GET", f"{stack.url}/readyz")
        assert status == 200, ready  # the database, the embedded broker and kubesim answer
        # The seed's spill-over scene: onprem's L4s were taken, so sam's request went
        # to cloud, and its timeline says why.
        sam = stack.login("sam")
        spilled = stack.cluster("speech", "sam-l4-eval", sam)
        assert spilled is not None and spilled["kube_cluster"] == "cloud", spilled
        said = [event["message"] for event in spilled["events"]]
        assert any("admitted to run in cloud (onprem is full)" in m for m in said), said
        filled = [stack.cluster("speech", n, sam) for n in ("emma-l4-sweep", "eve-l4-notebook")]
        assert [c and c["kube_cluster"] for c in filled] == ["onprem", "onprem"], filled
        until(
            lambda: (c := stack.cluster("speech", "sam-l4-eval", sam)) and c["state"] == "ready",
            120,
            "the spilled-over request to be ready on cloud",
        )
        token = stack.login("eli")
        first = _ready(stack, "first", token)
        assert first["endpoints"]["client_address"] == "ray://first-head-svc.gw-vision.svc:10001"

        children = stack.children()
        roles = ["beat", "kubesim", "kubesim-cloud", "mail", "rayweb", "web", "webhooks", "worker"]
        assert sorted(children) == roles, children
        # Each child runs in var/: whatever it writes by a relative path lands there.
        for pid in children.values():
            assert Path(f"/proc/{pid}/cwd").resolve() == stack.var.resolve()
        # kubesim listens on KUBE_PORT, and the kubeconfig the worker uses says so.
        kubeconfig = yaml.safe_load((stack.var / "kubeconfig").read_text())
        assert kubeconfig["clusters"][0]["cluster"]["server"].endswith(f":{stack.kube_port}")

        # The worker dies hard: make run says so, starts another, and work goes on.
        os.kill(children["worker"], signal.SIGKILL)
        until(
            lambda: (
                "worker exited with code -9 (SIGKILL); restarting in 1s (restart 1)" in stack.output
            ),
            30,
            "make run to report the dead worker",
        )
        until(
            lambda: stack.children().get("worker") not in (None, children["worker"]),
            30,
            "a new worker",
        )
        # On a 1g.10gb MIG slice of the H100 node the DRA driver manages (docs/dra.md).
        second = _ready(stack, "second", token, flavor="h100-1g")
        assert (second["state"], second["flavor"], float(second["gpus"])) == ("ready", "h100-1g", 1)

        # The Ray dashboards' own origin: another host (cookies are per host), the next
        # port, serving nothing of the product.
        status, text = http("GET", f"http://localhost:{stack.port + 1}/api/v1/")
        assert status == 404 and "Ray dashboards only" in text, text
        assert f"Ray dashboards: http://localhost:{stack.port + 1}/" in stack.output

        # DEBUG is off: an unknown address is a plain 404, not Django's technical page
        # listing every URL pattern.
        status, page = http("GET", f"{stack.url}/no-such-page/")
        assert status == 404
        assert "URLconf" not in page and "healthz" not in page and "api/v1/" not in page
        # Static files are served without DEBUG too (the dashboard needs its CSS).
        status, _ = http("GET", f"{stack.url}/static/frontend/css/gangway.css")
        assert status == 200
        # The web server writes a request's log line once it has answered: it may land
        # after the next request's line.
        until(lambda: "GET /no-such-page/" in stack.logs()["web"], 10, "the 404 in the web log")
    finally:
        code = stack.stop()
    assert code == 0
    assert "gangway-demo" in stack.output  # the logins were printed
    assert f"gangway:  http://127.0.0.1:{stack.port}/" in stack.output
    assert "real Ray: off (REAL_RAY=0" in stack.output
    exits = [line for line in stack.output.splitlines() if " exited with " in line]
    assert len(exits) == 1 and exits[0].startswith("worker exited with code -9"), exits
    for busy in (
        stack.port,
        stack.port + 1,
        stack.kube_port,
        stack.cloud_kube_port,
        stack.mail_port,
        stack.webhook_port,
    ):
        assert not port_served(busy), f"port {busy} still served"
    alive = [pid for pid in children.values() if Path(f"/proc/{pid}").exists()]
    assert alive == [], f"processes left running: {alive}"
    assert stack.children() == {}
    assert tree_changes() - changed_before == set(), "make run wrote outside var/"


def test_make_run_refuses_a_port_in_use_and_names_the_variable(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "scripts/run.py", "--port", "0", "--kube-port", str(port)],
            cwd=run.ROOT,
            env={"PATH": os.environ["PATH"], "GANGWAY_VAR_DIR": str(tmp_path / "var")},
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode == 1
    assert f"port {port} is in use" in result.stdout and "KUBE_PORT=<port>" in result.stdout


def _exited(code: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([sys.executable, "-c", f"raise SystemExit({code})"])
    proc.wait()
    return proc


def test_an_exited_child_is_restarted_after_a_growing_pause(
    capsys: pytest.CaptureFixture[str],
) -> None:
    child = run.Child("worker", [])
    now = time.monotonic()
    for restart, pause in enumerate([1, 2, 4, 8], start=1):
        child.proc, child.started, child.restart_at = _exited(3), now, None
        run.check_exit(child, now + 1)
        assert child.restart_at == now + 1 + pause
        assert (
            f"worker exited with code 3; restarting in {pause}s (restart {restart})"
            in capsys.readouterr().out
        )
    # A child that stayed up a while before exiting starts over at a 1 s pause.
    child.proc, child.started, child.restart_at = _exited(1), now - run.STABLE_SECONDS, None
    run.check_exit(child, now)
    assert child.restart_at == now + 1
    assert "(restart 5)" in capsys.readouterr().out


def test_a_child_that_keeps_dying_at_start_stops_make_run(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setattr(run, "VAR", tmp_path)
    monkeypatch.setattr(run, "MAX_PAUSE_SECONDS", 0)  # no need to sit through the pauses
    child = run.Child("web", [sys.executable, "-c", "raise SystemExit(2)"])
    env = dict(os.environ)
    child.start(env)
    with pytest.raises(run.GiveUp, match=r"web exited with code 2, 5 times in a row"):
        run.supervise([child], env)
    assert child.restarts == run.MAX_QUICK_EXITS - 1


def test_make_run_turns_debug_off_unless_asked(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setattr(run, "VAR", tmp_path)
    for name in ("DEBUG", "SECRET_KEY", "SECRET_KEY_FILE", "SECURE_SSL_REDIRECT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("KUBECONFIG", "relative/kubeconfig")
    env = run.child_environment()
    assert env["DEBUG"] == "0" and env["SECURE_SSL_REDIRECT"] == "0"
    key = Path(env["SECRET_KEY_FILE"])
    assert key.parent == tmp_path and len(key.read_text()) >= 50
    assert run.child_environment()["SECRET_KEY_FILE"] == str(key)  # made once, then kept
    assert env["KUBECONFIG"] == str(Path("relative/kubeconfig").resolve())

    monkeypatch.setenv("DEBUG", "1")
    env = run.child_environment()
    assert env["DEBUG"] == "1" and "SECRET_KEY_FILE" not in env


@pytest.mark.slow
def test_make_run_mails_to_var_mail_and_posts_webhooks_to_its_own_receiver(
    tmp_path: Path,
) -> None:
    """Out of the box, a cluster that becomes ready is mailed to its owner (a file under
    var/mail/, sent by the real worker through the mail sink) and posted to the demo
    tenant's webhook (make run's receiver, the one private address allowed); a webhook
    to any other loopback address is still refused."""
    stack = MakeRun(tmp_path)
    try:
        stack.wait_serving()
        token = stack.login("eli")
        # eli's own webhook points at another loopback port: refused as non-public.
        status, body = http(
            "PUT",
            f"{stack.api}/notifications/preferences/",
            {"webhook_url": f"http://127.0.0.1:{stack.port}/not-allowed", "preferences": []},
            token,
        )
        assert status == 200, body
        _ready(stack, "noticed", token)

        def mail() -> email.message.Message | None:
            for path in sorted((stack.var / "mail").glob("*.eml")):
                message = email.message_from_bytes(path.read_bytes())
                if "noticed" in str(message["Subject"]):
                    return message
            return None

        message = until(mail, 60, "the ready mail under var/mail/")
        assert message["X-Envelope-To"] == "eli@example.com"
        assert "is ready" in message.get_payload(decode=True).decode()
        assert f"http://127.0.0.1:{stack.port}/t/vision/clusters/noticed/" in str(
            message.get_payload(decode=True).decode()
        )

        def posted() -> dict[str, Any] | None:
            for path in sorted((stack.var / "webhooks").glob("*.json")):
                record = json.loads(path.read_text())
                if record["body"].get("cluster") == "noticed":
                    return dict(record)
            return None

        record = until(posted, 60, "the ready webhook under var/webhooks/")
        assert record["body"]["event"] == "cluster_ready" and record["body"]["tenant"] == "vision"
        assert record["headers"]["X-Gangway-Signature"]
        status, listed = http("GET", f"http://127.0.0.1:{stack.webhook_port}/")
        assert status == 200 and any(r["body"].get("cluster") == "noticed" for r in listed)

        def deliveries() -> dict[str, Any] | None:
            status, page = http("GET", f"{stack.api}/notifications/deliveries/", token=token)
            assert status == 200, page
            rows = {
                row["channel"]: row
                for row in page["results"]
                if row["kind"] == "cluster_ready" and row["status"] != "pending"
            }
            return rows if len(rows) == 2 else None

        rows = until(deliveries, 60, "eli's mail and webhook deliveries to be tried")
        assert rows["email"]["status"] == "sent"
        assert rows["webhook"]["status"] == "gave_up"
        assert "non-public" in rows["webhook"]["last_error"]
    finally:
        code = stack.stop()
    assert code == 0
    assert f"mail:     {stack.var}/mail/*.eml" in stack.output
    assert "mail to eli@example.com" in stack.logs()["mail"]
    assert "webhook cluster_ready" in stack.logs()["webhooks"]


def test_make_run_mails_its_sink_unless_mail_goes_elsewhere(
    tmp_path: Path, monkeypatch: Any
) -> None:
    monkeypatch.setattr(run, "VAR", tmp_path)
    args = argparse.Namespace(port=8120, mail_port=8124, webhook_port=8125)
    env = {"NOTIFY_WEBHOOK_ALLOWED_PRIVATE_HOSTS": "receiver.internal"}
    run.notification_environment(args, env, own_mail=True)
    assert env["NOTIFY_WEBHOOK_ALLOWED_PRIVATE_HOSTS"] == "receiver.internal,127.0.0.1:8125"
    assert (env["EMAIL_HOST"], env["EMAIL_PORT"]) == ("127.0.0.1", "8124")
    assert env["MAIL_SINK_DIR"] == str(tmp_path / "mail")
    assert env["PUBLIC_BASE_URL"] == "http://127.0.0.1:8120"
    assert [c.name for c in run.notification_sinks(args, own_mail=True)] == ["mail", "webhooks"]

    # A deployment's own mail server: no sink, no Mail page, its settings untouched.
    assert run.own_mail_sink({"EMAIL_HOST": "smtp.example.com"}) is False
    assert run.own_mail_sink({"EMAIL_BACKEND": "x"}) is False and run.own_mail_sink({})
    env = {"EMAIL_HOST": "smtp.example.com"}
    run.notification_environment(args, env, own_mail=False)
    assert env["EMAIL_HOST"] == "smtp.example.com" and "MAIL_SINK_DIR" not in env
    assert env["NOTIFY_WEBHOOK_ALLOWED_PRIVATE_HOSTS"] == "127.0.0.1:8125"
    assert [c.name for c in run.notification_sinks(args, own_mail=False)] == ["webhooks"]
