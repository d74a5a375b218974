"""``kubectl port-forward`` against kubesim, with the real kubectl binary: its first try,
SPDY/3.1 tunnelled in a WebSocket (KEP-4006), and its fallback, the plain SPDY/3.1
upgrade (``KUBECTL_PORT_FORWARD_WEBSOCKETS=false`` makes kubectl use it at once). Behind
the pod: a real process, the echo stand-in on a declared port, and the kubelet's error on
a port nothing listens on."""

from __future__ import annotations

import http.client
import os
import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from benchmarks.support import free_port
from kubesim import KubeSim
from tests.kubesim.test_kubesim_portforward import _pod, _recv_exactly, _running, api, psim
from tests.kubesim.test_localproc import _get, wait_for

__all__ = ["api", "psim"]

KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")

# What kubectl's own log (-v=6) says of the way it took.
WAYS = {
    "websocket": "negotiated protocol: portforward.k8s.io",
    "spdy": 'verb="POST" url=',
}


class Forward:
    """A running ``kubectl port-forward``, its local ports announced."""

    def __init__(
        self, psim: KubeSim, tmp_path: Path, way: str, target: str, *ports: str, announced: str = ""
    ) -> None:
        kubeconfig = psim.write_kubeconfig(str(tmp_path / "kubeconfig"))
        env = {**os.environ, "KUBECTL_PORT_FORWARD_WEBSOCKETS": str(way == "websocket").lower()}
        assert KUBECTL is not None
        self.process = subprocess.Popen(
            [KUBECTL, "--kubeconfig", kubeconfig, "-v=6", "port-forward", target, *ports],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        for spec in ports:
            local, remote = spec.split(":")
            remote = announced or remote
            line = self.process.stdout.readline()
            assert line.startswith(f"Forwarding from 127.0.0.1:{local} -> {remote}"), line

    def stop(self) -> str:
        """End kubectl; its log."""
        if self.process.poll() is None:
            self.process.terminate()
        _, err = self.process.communicate(timeout=30)
        return err


@pytest.fixture(params=sorted(WAYS))
def way(request: pytest.FixtureRequest) -> Iterator[str]:
    yield request.param


def test_kubectl_port_forward_reaches_the_pods_real_process(
    psim: KubeSim, api: client.ApiClient, tmp_path: Path, way: str
) -> None:
    core = client.CoreV1Api(api)
    core.create_namespaced_pod("default", _pod("web", [8080], label="http"))
    addr = wait_for(lambda: psim.cluster.localprocs.address("default", "web", 8080))
    wait_for(lambda: _get(f"http://127.0.0.1:{addr[1]}/") == 200)
    local = free_port()
    forward = Forward(psim, tmp_path, way, "pod/web", f"{local}:8080")
    try:
        # Two requests, each its own connection: two stream pairs in one session.
        for _ in range(2):
            conn = http.client.HTTPConnection("127.0.0.1", local, timeout=30)
            conn.request("GET", "/", headers={"Connection": "close"})
            response = conn.getresponse()
            assert response.status == 200
            assert b"Directory listing" in response.read()
            conn.close()
    finally:
        log = forward.stop()
    assert WAYS[way] in log, log[-3000:]


def test_kubectl_port_forward_to_the_echo_carries_a_megabyte_both_ways(
    psim: KubeSim, api: client.ApiClient, tmp_path: Path, way: str
) -> None:
    core = client.CoreV1Api(api)
    core.create_namespaced_pod("default", _pod("plain", [7000]))
    _running(core, "plain")
    local = free_port()
    forward = Forward(psim, tmp_path, way, "pod/plain", f"{local}:7000")
    payload = bytes(range(256)) * 4096  # many SPDY data frames
    try:
        with socket.create_connection(("127.0.0.1", local), timeout=30) as conn:
            conn.sendall(b"hello")
            assert _recv_exactly(conn, 5) == b"hello"
            conn.sendall(payload)
            assert _recv_exactly(conn, len(payload)) == payload
    finally:
        forward.stop()


def test_kubectl_reports_the_kubelets_error_for_a_port_nothing_listens_on(
    psim: KubeSim, api: client.ApiClient, tmp_path: Path, way: str
) -> None:
    core = client.CoreV1Api(api)
    core.create_namespaced_pod("default", _pod("plain", [7000]))
    _running(core, "plain")
    local = free_port()
    forward = Forward(psim, tmp_path, way, "pod/plain", f"{local}:9999")
    with socket.create_connection(("127.0.0.1", local), timeout=30) as conn:
        assert conn.recv(10) == b""
    # As against a real cluster, kubectl says why, and ends.
    forward.process.wait(timeout=60)
    log = forward.stop()
    assert "an error occurred forwarding" in log
    assert "error forwarding port 9999 to pod default/plain" in log
    assert "connect: connection refused" in log
    assert "error: lost connection to pod" in log
    assert forward.process.returncode == 1


def test_kubectl_port_forward_to_a_pod_that_is_not_running_is_refused(
    psim: KubeSim, api: client.ApiClient, tmp_path: Path
) -> None:
    assert KUBECTL is not None
    kubeconfig = psim.write_kubeconfig(str(tmp_path / "kubeconfig"))
    done = subprocess.run(
        [KUBECTL, "--kubeconfig", kubeconfig, "port-forward", "pod/nosuch", "7000:7000"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert 'pods "nosuch" not found' in done.stderr


def test_kubectl_port_forward_to_a_service_reaches_a_pod_it_selects(
    psim: KubeSim, api: client.ApiClient, tmp_path: Path
) -> None:
    core = client.CoreV1Api(api)
    body = _pod("plain", [7000])
    body["metadata"]["labels"]["app"] = "echo"
    core.create_namespaced_pod("default", body)
    service = {"selector": {"app": "echo"}, "ports": [{"port": 80, "targetPort": 7000}]}
    core.create_namespaced_service("default", {"metadata": {"name": "echo"}, "spec": service})
    _running(core, "plain")
    local = free_port()
    # kubectl resolves the service to a pod and its port 80 to the pod's 7000 itself.
    forward = Forward(psim, tmp_path, "websocket", "service/echo", f"{local}:80", announced="7000")
    try:
        with socket.create_connection(("127.0.0.1", local), timeout=30) as conn:
            conn.sendall(b"through the service")
            assert _recv_exactly(conn, 19) == b"through the service"
    finally:
        forward.stop()
