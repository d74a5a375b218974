"""Real processes behind simulated pods: started when the pod runs, reachable on the
loopback port mapped to the pod's port, ended with the pod, on reset and at stop, and
killed when they pass their memory bound."""

from __future__ import annotations

import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from kubesim import KubeSim
from kubesim.localproc import ProcessSpec, free_port
from tests.kubesim.kubesim_helpers import pod_manifest

SERVE_LABEL = "test.kubesim/serve"
GATED = """
import http.server, os, sys
class Gate(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if os.path.exists("open") else 503)
        self.send_header("Content-Length", "0")
        self.end_headers()
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Gate).serve_forever()
"""


def http_launcher(cluster: Any, pod: dict[str, Any]) -> list[ProcessSpec]:
    """A test launcher: pods labelled ``test.kubesim/serve`` get Python's HTTP server on
    their port 8080 (and a memory hog when the label says ``hog``)."""
    label = (pod["metadata"].get("labels") or {}).get(SERVE_LABEL)
    if label == "http":
        port = free_port()
        argv = [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"]
        return [ProcessSpec("http", argv, ports={8080: port})]
    if label in ("gated", "gated-patient"):
        # Answers 503 until the file ``open`` exists in its working directory; "patient"
        # is a probe that tolerates failures for 5 s, as a failureThreshold does.
        port = free_port()
        return [
            ProcessSpec(
                "gated",
                [sys.executable, "-c", GATED, str(port)],
                ports={8080: port},
                ready_port=8080,
                ready_path="/healthz",
                unready_after_seconds=5.0 if label == "gated-patient" else 0.0,
            )
        ]
    if label in ("exit3", "flaky"):
        main = label == "exit3"
        code = "import sys; sys.exit(3)"
        return [ProcessSpec(label, [sys.executable, "-c", code], main=main)]
    if label == "hog":
        hog = "x = bytearray(300 << 20); import time; time.sleep(60)"
        return [ProcessSpec("hog", [sys.executable, "-c", hog], memory_bytes=100 << 20)]
    return []


@pytest.fixture
def psim(tmp_path: Path) -> Iterator[KubeSim]:
    s = KubeSim(startup_delay=0.0, procs_root=str(tmp_path / "procs"))
    s.cluster.localprocs.add_launcher(http_launcher)
    s.start()
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture
def pcore(psim: KubeSim, tmp_path: Path) -> Iterator[client.CoreV1Api]:
    from kubernetes import config

    api = config.new_client_from_config(config_file=psim.write_kubeconfig(str(tmp_path / "kc")))
    try:
        yield client.CoreV1Api(api)
    finally:
        api.close()


def wait_for(check: Any, timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError("condition not reached")


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except OSError:
        return 0


def _get(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return int(resp.status)
    except OSError:
        return 0


def _served_pod(name: str, label: str) -> dict[str, Any]:
    body = pod_manifest(name)
    body["metadata"]["labels"] = {SERVE_LABEL: label}
    return body


def test_process_serves_the_pod_port_and_ends_with_the_pod(
    psim: KubeSim, pcore: client.CoreV1Api
) -> None:
    pcore.create_namespaced_pod("default", _served_pod("web", "http"))
    addr = wait_for(lambda: psim.cluster.localprocs.address("default", "web", 8080))
    assert addr[0] == "127.0.0.1"
    assert wait_for(lambda: _get(f"http://127.0.0.1:{addr[1]}/") == 200)
    # Another port of the pod, and a pod without the label, have nothing behind them.
    assert psim.cluster.localprocs.address("default", "web", 9090) is None
    pcore.create_namespaced_pod("default", _served_pod("plain", "none"))
    assert psim.cluster.localprocs.processes("default", "plain") == {}

    popen = psim.cluster.localprocs.processes("default", "web")["http"].popen
    pcore.delete_namespaced_pod("web", "default", grace_period_seconds=0)
    wait_for(lambda: popen.poll() is not None)
    assert psim.cluster.localprocs.address("default", "web", 8080) is None
    assert _get(f"http://127.0.0.1:{addr[1]}/") == 0


def test_every_process_ends_when_kubesim_stops_and_returns_on_restart(
    psim: KubeSim, pcore: client.CoreV1Api
) -> None:
    pcore.create_namespaced_pod("default", _served_pod("web", "http"))
    wait_for(lambda: psim.cluster.localprocs.address("default", "web", 8080))
    popen = psim.cluster.localprocs.processes("default", "web")["http"].popen
    psim.restart(keep_state=True)
    assert popen.poll() is not None
    # The pod is still Running after the restart, so its process is launched again.
    addr = wait_for(lambda: psim.cluster.localprocs.address("default", "web", 8080))
    assert wait_for(lambda: _get(f"http://127.0.0.1:{addr[1]}/") == 200)
    again = psim.cluster.localprocs.processes("default", "web")["http"].popen
    assert again.pid != popen.pid
    psim.stop()
    assert again.poll() is not None


def test_a_process_over_its_memory_bound_is_killed(psim: KubeSim, pcore: client.CoreV1Api) -> None:
    pcore.create_namespaced_pod("default", _served_pod("hog", "hog"))
    run = wait_for(lambda: psim.cluster.localprocs.processes("default", "hog").get("hog"))
    wait_for(lambda: run.popen.poll() is not None, timeout=30)
    assert run.oom_killed


def test_without_a_root_nothing_is_launched(sim: KubeSim, core: client.CoreV1Api) -> None:
    sim.cluster.localprocs.add_launcher(http_launcher)
    core.create_namespaced_pod("default", _served_pod("web", "http"))
    assert not sim.cluster.localprocs.enabled
    assert sim.cluster.localprocs.processes("default", "web") == {}


def _ready(pcore: client.CoreV1Api, name: str) -> bool:
    pod = pcore.read_namespaced_pod(name, "default")
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


def test_a_probed_pod_is_ready_only_while_its_process_answers(
    psim: KubeSim, pcore: client.CoreV1Api
) -> None:
    pcore.create_namespaced_pod("default", _served_pod("gated", "gated"))
    addr = wait_for(lambda: psim.cluster.localprocs.address("default", "gated", 8080))
    # Serving, but answering 503: not Ready.
    wait_for(lambda: _status(f"http://127.0.0.1:{addr[1]}/healthz") == 503)
    assert not _ready(pcore, "gated")
    run = psim.cluster.localprocs.processes("default", "gated")["gated"]
    (run.workdir / "open").touch()
    wait_for(lambda: _ready(pcore, "gated"))
    # The process goes: the pod is not Ready until it is back and answers again.
    run.popen.kill()
    wait_for(lambda: not _ready(pcore, "gated"))
    wait_for(lambda: _ready(pcore, "gated"))
    assert psim.cluster.localprocs.processes("default", "gated")["gated"].restarts == 1


def test_a_ready_pod_stays_ready_through_failures_shorter_than_its_threshold(
    psim: KubeSim, pcore: client.CoreV1Api
) -> None:
    pcore.create_namespaced_pod("default", _served_pod("patient", "gated-patient"))
    addr = wait_for(lambda: psim.cluster.localprocs.address("default", "patient", 8080))
    run = psim.cluster.localprocs.processes("default", "patient")["gated"]
    (run.workdir / "open").touch()
    wait_for(lambda: _ready(pcore, "patient"))
    # The probe fails from now on: the pod stays in its services' endpoints for the
    # threshold, then leaves them.
    (run.workdir / "open").unlink()
    assert _status(f"http://127.0.0.1:{addr[1]}/healthz") == 503
    wait_for(lambda: run.failing_since is not None)
    assert _ready(pcore, "patient")
    wait_for(lambda: not _ready(pcore, "patient"))
    assert time.monotonic() - run.failing_since >= 5.0


def test_the_main_process_s_exit_ends_the_pod_and_others_are_restarted(
    psim: KubeSim, pcore: client.CoreV1Api
) -> None:
    pcore.create_namespaced_pod("default", _served_pod("job", "exit3"))
    wait_for(lambda: pcore.read_namespaced_pod("job", "default").status.phase == "Failed")
    (status,) = pcore.read_namespaced_pod("job", "default").status.container_statuses
    assert status.state.terminated.exit_code == 3
    assert psim.cluster.localprocs.processes("default", "job") == {}

    pcore.create_namespaced_pod("default", _served_pod("flaky", "flaky"))
    wait_for(lambda: psim.cluster.localprocs.processes("default", "flaky")["flaky"].restarts >= 2)
    assert pcore.read_namespaced_pod("flaky", "default").status.phase == "Running"


def test_a_later_launcher_sees_the_ports_an_earlier_one_started(
    psim: KubeSim, pcore: client.CoreV1Api
) -> None:
    """As a notebook's launcher finds the real Ray head started for the same pod."""
    seen: list[tuple[str, int] | None] = []

    def second(cluster: Any, pod: dict[str, Any]) -> list[ProcessSpec]:
        meta = pod["metadata"]
        seen.append(cluster.localprocs.address(meta["namespace"], meta["name"], 8080))
        return []

    psim.cluster.localprocs.add_launcher(second)
    pcore.create_namespaced_pod("default", _served_pod("web", "http"))
    addr = wait_for(lambda: psim.cluster.localprocs.address("default", "web", 8080))
    assert seen == [addr]


def test_ports_are_picked_below_the_ephemeral_range_and_free(monkeypatch: Any) -> None:
    """A launcher's ports come from below the kernel's ephemeral range, where no
    ``bind(0)`` or outgoing connection can take them before the process binds them; a
    port something is bound to is never picked."""
    import socket

    from kubesim import localproc

    start = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    first = free_port(span=3)
    assert first >= localproc.FIRST_PORT and first + 2 < start
    for port in range(first, first + 3):
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))  # free: this would raise otherwise
    # With only two candidates and one of them held, the other is the one picked.
    monkeypatch.setattr(localproc, "_ephemeral_start", lambda: localproc.FIRST_PORT + 2)
    with socket.socket() as held:
        held.bind(("127.0.0.1", localproc.FIRST_PORT))
        assert {free_port() for _ in range(20)} == {localproc.FIRST_PORT + 1}
