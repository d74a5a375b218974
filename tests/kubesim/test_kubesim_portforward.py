"""``pods/portforward`` over WebSocket, driven by the official client's
``kubernetes.stream.portforward`` and by a plain WebSocket client (for the handshake,
the channel framing and RBAC): a real process behind the pod port, the echo stand-in
on a declared port, and the kubelet's error on a port nothing listens on."""

from __future__ import annotations

import http.client
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config
from kubernetes.stream import portforward
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from kubesim import KubeSim
from kubesim.fleet import DEMO_FLEET
from tests.kubesim.kubesim_helpers import pod_manifest
from tests.kubesim.test_localproc import SERVE_LABEL, _get, http_launcher, wait_for


def _pod(name: str, ports: list[int], label: str = "none") -> dict[str, Any]:
    body = pod_manifest(name)
    body["metadata"]["labels"] = {SERVE_LABEL: label}
    body["spec"]["containers"][0]["ports"] = [{"containerPort": p} for p in ports]
    return body


def _running(core: client.CoreV1Api, name: str) -> None:
    wait_for(lambda: core.read_namespaced_pod(name, "default").status.phase == "Running")


def _recv_exactly(sock: Any, size: int) -> bytes:
    data = b""
    while len(data) < size:
        more = sock.recv(size - len(data))
        if not more:
            break
        data += more
    return data


@pytest.fixture
def psim(tmp_path: Path) -> Iterator[KubeSim]:
    with open(DEMO_FLEET, encoding="utf-8") as fh:
        fleet = yaml.safe_load(fh)
    fleet["users"] = [{"name": "alice", "token": "alice-token", "username": "alice"}]
    s = KubeSim(fleet=fleet, startup_delay=0.0, procs_root=str(tmp_path / "procs"))
    s.cluster.localprocs.add_launcher(http_launcher)
    s.start()
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture
def api(psim: KubeSim, tmp_path: Path) -> Iterator[client.ApiClient]:
    kube = config.new_client_from_config(config_file=psim.write_kubeconfig(str(tmp_path / "kc")))
    try:
        yield kube
    finally:
        kube.close()


def test_the_official_client_reaches_the_real_process_behind_the_pod_port(
    psim: KubeSim, api: client.ApiClient
) -> None:
    core = client.CoreV1Api(api)
    core.create_namespaced_pod("default", _pod("web", [8080], label="http"))
    addr = wait_for(lambda: psim.cluster.localprocs.address("default", "web", 8080))
    wait_for(lambda: _get(f"http://127.0.0.1:{addr[1]}/") == 200)
    forward = portforward(
        core.connect_get_namespaced_pod_portforward, "web", "default", ports="8080"
    )
    conn = http.client.HTTPConnection("web", 8080)
    conn.sock = forward.socket(8080)
    conn.request("GET", "/")
    response = conn.getresponse()
    assert response.status == 200
    assert b"Directory listing" in response.read()
    forward.close()
    assert forward.error(8080) is None


def test_a_declared_port_without_a_process_is_the_echo_stand_in(
    psim: KubeSim, api: client.ApiClient
) -> None:
    core = client.CoreV1Api(api)
    core.create_namespaced_pod("default", _pod("plain", [7000, 7001]))
    _running(core, "plain")
    forward = portforward(
        core.connect_get_namespaced_pod_portforward, "plain", "default", ports="7000,7001"
    )
    for port, word in ((7000, b"hello"), (7001, b"second port")):
        sock = forward.socket(port)
        sock.setblocking(True)
        sock.sendall(word)
        assert _recv_exactly(sock, len(word)) == word
    forward.close()


def test_a_port_nothing_listens_on_gets_the_kubelets_error(
    psim: KubeSim, api: client.ApiClient
) -> None:
    core = client.CoreV1Api(api)
    core.create_namespaced_pod("default", _pod("plain", [7000]))
    _running(core, "plain")
    forward = portforward(
        core.connect_get_namespaced_pod_portforward, "plain", "default", ports="9999"
    )
    sock = forward.socket(9999)
    sock.setblocking(True)
    assert sock.recv(10) == b""  # closed: the error channel spoke
    error = forward.error(9999)
    assert error is not None
    assert "error forwarding port 9999 to pod default/plain" in error
    assert "connection refused" in error


def _ws_url(psim: KubeSim, pod: str, query: str) -> str:
    return f"ws://127.0.0.1:{psim.port}/api/v1/namespaces/default/pods/{pod}/portforward?{query}"


def test_the_channel_protocol_framing_and_negotiation(psim: KubeSim, api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    core.create_namespaced_pod("default", _pod("plain", [7000]))
    _running(core, "plain")
    offered: Any = ["v5.channel.k8s.io", "v4.channel.k8s.io"]
    with connect(_ws_url(psim, "plain", "ports=7000"), subprotocols=offered) as ws:
        assert ws.subprotocol == "v4.channel.k8s.io"
        # The first message on the data (0) and error (1) channels: the port, little-endian.
        assert ws.recv() == bytes([0]) + (7000).to_bytes(2, "little")
        assert ws.recv() == bytes([1]) + (7000).to_bytes(2, "little")
        ws.send(b"\x00ping")
        assert ws.recv() == b"\x00ping"
    with connect(
        _ws_url(psim, "plain", "ports=7000"), subprotocols=["v4.base64.channel.k8s.io"]
    ) as ws:  # type: ignore[list-item]
        assert ws.recv() == "0WBs="
        assert ws.recv() == "1WBs="
        ws.send("0cGluZw==")
        assert ws.recv() == "0cGluZw=="
    with pytest.raises(InvalidStatus) as refused:
        connect(_ws_url(psim, "plain", "ports=7000"), subprotocols=["v5.channel.k8s.io"])  # type: ignore[list-item]
    assert refused.value.response.status_code == 400


def test_refusals_before_the_upgrade(psim: KubeSim, api: client.ApiClient) -> None:
    with pytest.raises(InvalidStatus) as missing:
        connect(_ws_url(psim, "ghost", "ports=80"))
    assert missing.value.response.status_code == 404
    assert b'pods \\"ghost\\" not found' in (missing.value.response.body or b"")
    core = client.CoreV1Api(api)
    core.create_namespaced_pod("default", _pod("plain", [7000]))
    _running(core, "plain")
    for query in ("", "ports=abc", "ports=70000"):
        with pytest.raises(InvalidStatus) as bad:
            connect(_ws_url(psim, "plain", query))
        assert bad.value.response.status_code == 400


def test_rbac_asks_for_create_on_pods_portforward(psim: KubeSim, api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    core.create_namespaced_pod("default", _pod("plain", [7000]))
    _running(core, "plain")
    rbac = client.RbacAuthorizationV1Api(api)
    role: dict[str, Any] = {
        "metadata": {"name": "pf"},
        "rules": [{"apiGroups": [""], "resources": ["pods/portforward"], "verbs": ["get"]}],
    }
    rbac.create_namespaced_role("default", role)
    rbac.create_namespaced_role_binding(
        "default",
        {
            "metadata": {"name": "pf"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pf"},
            "subjects": [{"kind": "User", "name": "alice"}],
        },
    )
    auth = {"Authorization": "Bearer alice-token"}
    with pytest.raises(InvalidStatus) as refused:
        connect(_ws_url(psim, "plain", "ports=7000"), additional_headers=auth)
    assert refused.value.response.status_code == 403
    assert b'cannot create resource \\"pods/portforward\\"' in (refused.value.response.body or b"")
    role["rules"][0]["verbs"] = ["get", "create"]
    rbac.replace_namespaced_role("pf", "default", role)
    with connect(_ws_url(psim, "plain", "ports=7000"), additional_headers=auth) as ws:
        assert ws.subprotocol is None
        assert ws.recv() == bytes([0]) + (7000).to_bytes(2, "little")


def test_a_pod_that_is_not_running_is_refused(psim: KubeSim, api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    body = _pod("pending", [7000])
    body["spec"]["nodeSelector"] = {"nowhere": "true"}
    core.create_namespaced_pod("default", body)
    with pytest.raises(InvalidStatus) as refused:
        connect(_ws_url(psim, "pending", "ports=7000"))
    assert refused.value.response.status_code == 400
    assert b"does not have a host assigned" in (refused.value.response.body or b"")
