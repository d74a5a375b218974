"""The service proxy relays to a real process behind a pod (``kubesim/localrelay.py``):
an HTTP answer byte for byte (the process's own status, headers and body, the query as
sent) and a WebSocket piped both ways, whatever the process is."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import requests
from kubernetes import client
from websockets.sync.client import connect

from kubesim import KubeSim
from kubesim.localproc import ProcessSpec, free_port
from tests.kubesim.test_localproc import SERVE_LABEL, _served_pod, pcore, psim, wait_for

__all__ = ["pcore", "psim"]

SVC = "/api/v1/namespaces/default/services"
ECHO = """
import sys
from websockets.sync.server import serve
def echo(ws):
    for message in ws:
        ws.send(f"{ws.request.path} {message}")
with serve(echo, "127.0.0.1", int(sys.argv[1])) as server:
    server.serve_forever()
"""


def echo_launcher(cluster: Any, pod: dict[str, Any]) -> list[ProcessSpec]:
    """Pods labelled ``echo`` get a WebSocket echo server on their port 8080."""
    if (pod["metadata"].get("labels") or {}).get(SERVE_LABEL) != "echo":
        return []
    port = free_port()
    return [ProcessSpec("echo", [sys.executable, "-c", ECHO, str(port)], ports={8080: port})]


def _service(core: client.CoreV1Api, name: str, label: str) -> None:
    core.create_namespaced_service(
        "default",
        {
            "metadata": {"name": name},
            "spec": {
                "selector": {SERVE_LABEL: label},
                "ports": [{"name": "http", "port": 80, "targetPort": 8080}],
            },
        },
    )


def test_an_http_answer_comes_from_the_process_as_it_gave_it(
    psim: KubeSim, pcore: client.CoreV1Api
) -> None:
    pcore.create_namespaced_pod("default", _served_pod("web", "http"))
    _service(pcore, "web", "http")
    wait_for(lambda: psim.cluster.localprocs.address("default", "web", 8080))
    workdir = psim.cluster.localprocs.processes("default", "web")["http"].workdir
    (Path(workdir) / "hello.txt").write_text("hello from the pod\n")

    url = f"{psim.url}{SVC}/web:http/proxy/hello.txt?x=1"
    answer = wait_for(lambda: (r := requests.get(url, timeout=5)).status_code == 200 and r)
    assert answer.text == "hello from the pod\n"
    assert answer.headers["Server"].startswith("SimpleHTTP/")  # Python's server answered
    missing = requests.get(f"{psim.url}{SVC}/web:http/proxy/nope", timeout=5)
    assert missing.status_code == 404 and "SimpleHTTP" in missing.headers["Server"]

    pcore.delete_namespaced_pod("web", "default", grace_period_seconds=0)
    gone = requests.get(url, timeout=5)
    assert gone.status_code == 503


def test_a_websocket_is_piped_to_the_process_both_ways(
    psim: KubeSim, pcore: client.CoreV1Api
) -> None:
    psim.cluster.localprocs.add_launcher(echo_launcher)
    pcore.create_namespaced_pod("default", _served_pod("echo", "echo"))
    _service(pcore, "echo", "echo")
    addr = wait_for(lambda: psim.cluster.localprocs.address("default", "echo", 8080))

    def listening() -> bool:
        try:
            with connect(f"ws://127.0.0.1:{addr[1]}/", open_timeout=2):
                return True
        except OSError:
            return False

    wait_for(listening)
    url = psim.url.replace("http://", "ws://") + f"{SVC}/echo:http/proxy/room?id=7"
    with connect(url, open_timeout=10) as ws:
        for word in ("one", "two"):
            ws.send(word)
            assert ws.recv(timeout=10) == f"/room?id=7 {word}"
