"""The API server's service proxy (``kubesim/serviceproxy.py``) over real HTTP: service
resolution and its refusals in kube-apiserver's words, the path and query as sent, the
record of what a client forwarded, faults, and the official client's proxy call."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from typing import Any

import pytest
import requests
from kubernetes import client
from kubernetes.client.rest import ApiException
from kubesim_helpers import pod_manifest, raycluster

from kubesim import KubeSim
from tests.kubesim import manual_clock

# The simulator on a clock moved by hand (overrides conftest's real-clock ``sim``).
clock = manual_clock.clock
sim = manual_clock.sim
advance = manual_clock.advance

NS = "default"
SVC = f"/api/v1/namespaces/{NS}/services"


def create_rc(custom: client.CustomObjectsApi, name: str = "rc", **kw: Any) -> None:
    custom.create_namespaced_custom_object(
        "ray.io", "v1", NS, "rayclusters", raycluster(name, **kw)
    )


def status(body: requests.Response) -> tuple[int, str, str]:
    doc = body.json()
    assert doc["kind"] == "Status" and doc["code"] == body.status_code
    return body.status_code, doc["reason"], doc["message"]


def test_version_through_every_form_of_the_service_id(
    sim: KubeSim, custom: client.CustomObjectsApi
) -> None:
    create_rc(custom)
    for sid in ("rc-head-svc:dashboard", "rc-head-svc:8265", "http:rc-head-svc:dashboard"):
        r = requests.get(f"{sim.url}{SVC}/{sid}/proxy/api/version", timeout=5)
        assert r.status_code == 200, (sid, r.text)
        assert r.headers["Content-Type"] == "application/json; charset=utf-8"
        body = r.json()
        assert set(body) == {"version", "ray_version", "ray_commit", "session_name"}
        assert body["ray_version"] == "2.40.0"  # the helper's image rayproject/ray:2.40.0
        assert body["session_name"].startswith("session_")


def test_missing_service_and_port_refusals(sim: KubeSim, custom: client.CustomObjectsApi) -> None:
    # A port number reads the Service first; a port name (or none) reads its Endpoints.
    r = requests.get(f"{sim.url}{SVC}/nope:8265/proxy/api/version", timeout=5)
    assert status(r) == (404, "NotFound", 'services "nope" not found')
    r = requests.get(f"{sim.url}{SVC}/nope:dashboard/proxy/", timeout=5)
    assert status(r) == (404, "NotFound", 'endpoints "nope" not found')
    create_rc(custom)
    r = requests.get(f"{sim.url}{SVC}/rc-head-svc:1234/proxy/", timeout=5)
    assert status(r) == (
        503,
        "ServiceUnavailable",
        'no service port 1234 found for service "rc-head-svc"',
    )
    r = requests.get(f"{sim.url}{SVC}/rc-head-svc:metrics/proxy/", timeout=5)
    assert status(r) == (
        503,
        "ServiceUnavailable",
        'no endpoints available for service "rc-head-svc:metrics"',
    )
    # Every port of KubeRay's head service is named: no port name matches none.
    r = requests.get(f"{sim.url}{SVC}/rc-head-svc/proxy/", timeout=5)
    assert status(r)[:2] == (503, "ServiceUnavailable")
    r = requests.get(f"{sim.url}{SVC}/ftp:rc-head-svc:dashboard/proxy/", timeout=5)
    assert status(r) == (400, "BadRequest", 'invalid service request "ftp:rc-head-svc:dashboard"')


def test_non_http_ports_of_the_head_fail_as_a_proxy_would(
    sim: KubeSim, custom: client.CustomObjectsApi
) -> None:
    create_rc(custom)
    for port in ("gcs-server", "6379", "client", "10001"):
        r = requests.get(f"{sim.url}{SVC}/rc-head-svc:{port}/proxy/", timeout=5)
        code, reason, message = status(r)
        assert (code, reason) == (503, "ServiceUnavailable")
        assert message.startswith(
            "error trying to reach service: net/http: HTTP/1.x transport connection broken: "
            "malformed HTTP response"
        )
    r = requests.get(f"{sim.url}{SVC}/https:rc-head-svc:dashboard/proxy/", timeout=5)
    assert "tls: first record does not look like a TLS handshake" in status(r)[2]


def test_no_endpoints_while_suspended_or_not_ready(
    sim: KubeSim, custom: client.CustomObjectsApi, core: client.CoreV1Api
) -> None:
    create_rc(custom)
    assert requests.get(f"{sim.url}{SVC}/rc-head-svc:dashboard/proxy/", timeout=5).ok
    custom.patch_namespaced_custom_object(
        "ray.io", "v1", NS, "rayclusters", "rc", {"spec": {"suspend": True}}
    )
    r = requests.get(f"{sim.url}{SVC}/rc-head-svc:dashboard/proxy/", timeout=5)
    assert status(r) == (
        503,
        "ServiceUnavailable",
        'no endpoints available for service "rc-head-svc"',
    )
    # A head that exists but is not ready is a not-ready address: no endpoint for the port.
    with KubeSim(startup_delay=60.0) as slow:
        with slow.cluster.lock:
            slow.cluster.create_object(slow.cluster.rt("rayclusters.ray.io"), raycluster("rc"))
            slow.cluster.settle()
        r = requests.get(f"{slow.url}{SVC}/rc-head-svc:dashboard/proxy/", timeout=5)
        assert status(r)[:2] == (503, "ServiceUnavailable")


def test_other_pods_have_nothing_listening(sim: KubeSim, core: client.CoreV1Api) -> None:
    pod = pod_manifest("web")
    pod["metadata"]["labels"] = {"app": "web"}
    core.create_namespaced_pod(NS, pod)
    core.create_namespaced_service(
        NS,
        {
            "metadata": {"name": "web"},
            "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80}]},
        },
    )
    ip = core.read_namespaced_pod("web", NS).status.pod_ip
    r = requests.get(f"{sim.url}{SVC}/web:http/proxy/", timeout=5)
    assert status(r) == (
        503,
        "ServiceUnavailable",
        f"error trying to reach service: dial tcp {ip}:80: connect: connection refused",
    )


def test_path_slash_and_query_reach_the_backend_as_sent(
    sim: KubeSim, custom: client.CustomObjectsApi
) -> None:
    create_rc(custom)
    base = f"{sim.url}{SVC}/rc-head-svc:dashboard/proxy"
    assert requests.get(f"{base}/api/jobs/?limit=5&x=a%20b", timeout=5).json() == []
    # aiohttp routes /api/jobs/ only: without its slash it is the dashboard's 404.
    r = requests.get(f"{base}/api/jobs", timeout=5)
    assert (r.status_code, r.text, r.headers["Content-Type"]) == (
        404,
        "404: Not Found",
        "text/plain; charset=utf-8",
    )
    recorded = sim.proxy_requests()[-2:]
    assert [(e["path"], e["query"]) for e in recorded] == [
        ("/api/jobs/", "limit=5&x=a%20b"),
        ("/api/jobs", ""),
    ]
    # The bare proxy path is redirected to the directory, as the API server does.
    r = requests.get(f"{base}?a=1", timeout=5, allow_redirects=False)
    assert r.status_code == 301
    assert r.headers["Location"] == f"{SVC}/rc-head-svc:dashboard/proxy/?a=1"
    assert "Ray Dashboard" in requests.get(base, timeout=5).text


def test_recorded_headers_and_cookies(sim: KubeSim, custom: client.CustomObjectsApi) -> None:
    create_rc(custom)
    requests.delete(f"{sim.url}/_kubesim/proxy-requests", timeout=5)
    requests.post(
        f"{sim.url}{SVC}/rc-head-svc:dashboard/proxy/api/jobs/",
        json={"entrypoint": "python x.py"},
        headers={"Authorization": "Bearer kubesim", "X-Trace": "t1"},
        cookies={"ray_ui": "1"},
        timeout=5,
    )
    items = requests.get(f"{sim.url}/_kubesim/proxy-requests", timeout=5).json()["items"]
    assert len(items) == 1
    entry = items[0]
    assert (entry["method"], entry["namespace"], entry["service"], entry["path"]) == (
        "POST",
        NS,
        "rc-head-svc:dashboard",
        "/api/jobs/",
    )
    assert entry["status"] == 200
    assert entry["headers"]["Authorization"] == "Bearer kubesim"
    assert entry["headers"]["X-Trace"] == "t1"
    assert entry["cookies"] == {"ray_ui": "1"}
    # What the API server passes on: no Authorization, a forwarded-for.
    assert "Authorization" not in entry["forwardedHeaders"]
    assert entry["forwardedHeaders"]["X-Trace"] == "t1"
    assert entry["forwardedHeaders"]["X-Forwarded-For"] == "127.0.0.1"
    # Refusals are recorded too, with their status; other API calls are not.
    requests.get(f"{sim.url}{SVC}/nope:80/proxy/", timeout=5)
    requests.get(f"{sim.url}/api/v1/namespaces/{NS}/pods", timeout=5)
    items = sim.proxy_requests()
    assert [e["status"] for e in items] == [200, 404]


def test_faults_apply_to_proxy_requests(sim: KubeSim, custom: client.CustomObjectsApi) -> None:
    create_rc(custom)
    sim.set_faults(rate=1.0, codes=(503,), seed=1)
    r = requests.get(f"{sim.url}{SVC}/rc-head-svc:dashboard/proxy/api/version", timeout=5)
    assert status(r) == (
        503,
        "ServiceUnavailable",
        "the server is currently unable to handle the request",
    )
    assert sim.proxy_requests()[-1]["status"] == 503
    sim.clear_faults()
    assert requests.get(f"{sim.url}{SVC}/rc-head-svc:dashboard/proxy/api/version", timeout=5).ok


def test_official_client_proxy_call(
    sim: KubeSim, custom: client.CustomObjectsApi, core: client.CoreV1Api
) -> None:
    create_rc(custom)
    # The client quotes the path parameter ("api%2Fversion"); the server decodes it.
    resp = core.connect_get_namespaced_service_proxy_with_path(
        "rc-head-svc:dashboard", NS, "api/version", _preload_content=False
    )
    assert json.loads(resp.data)["ray_version"] == "2.40.0"
    resp = core.connect_get_namespaced_service_proxy_with_path(
        "rc-head-svc:8265", NS, "api/jobs/", _preload_content=False
    )
    assert json.loads(resp.data) == []
    assert sim.proxy_requests()[-1]["path"] == "/api/jobs/"
    # Without _preload_content the client hands back the text (HTML here).
    page = core.connect_get_namespaced_service_proxy_with_path("rc-head-svc:dashboard", NS, "")
    assert "Ray Dashboard" in page
    with pytest.raises(ApiException) as exc:
        core.connect_post_namespaced_service_proxy_with_path(
            "rc-head-svc:dashboard", NS, "api/jobs/x/stop"
        )
    assert (exc.value.status, exc.value.body) == (404, "Job x does not exist")
    with pytest.raises(ApiException) as exc:
        core.connect_get_namespaced_service_proxy_with_path("nope:8265", NS, "api/version")
    assert exc.value.status == 404
    assert json.loads(exc.value.body)["message"] == 'services "nope" not found'


def test_kubectl_get_raw_through_the_proxy(
    sim: KubeSim,
    custom: client.CustomObjectsApi,
    kubectl: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    create_rc(custom)
    out = kubectl("get", "--raw", f"{SVC}/rc-head-svc:dashboard/proxy/api/version").stdout
    assert json.loads(out)["ray_version"] == "2.40.0"
    proc = kubectl("get", "--raw", f"{SVC}/nope:8265/proxy/", check=False)
    assert proc.returncode != 0 and "not found" in proc.stderr
