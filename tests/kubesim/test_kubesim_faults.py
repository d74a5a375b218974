"""Fault injection: observed rates within tolerance, realistic Status bodies, Retry-After,
the admin API over HTTP, and admin paths never faulted."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections import Counter

from kubesim import KubeSim


def call(url: str, method: str = "GET", body: object = None) -> tuple[int, dict, dict]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(
        url, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req) as resp:
            return resp.status, json.loads(resp.read() or b"{}"), dict(resp.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}"), dict(exc.headers)


def test_rate_within_tolerance_and_bodies(sim: KubeSim) -> None:
    sim.set_faults(rate=0.2, codes=(500, 503, 429, 409), seed=7)
    codes: Counter[int] = Counter()
    for _ in range(1000):
        code, body, headers = call(sim.url + "/api/v1/namespaces/default/configmaps")
        codes[code] += 1
        if code == 429:
            assert headers["Retry-After"] == "1"
            assert body["reason"] == "TooManyRequests"
            assert body["details"]["retryAfterSeconds"] == 1
        elif code == 503:
            assert body["reason"] == "ServiceUnavailable" and body["kind"] == "Status"
        elif code == 500:
            assert body["reason"] == "InternalError"
        elif code == 409:
            assert body["reason"] == "Conflict"
    faulted = 1000 - codes[200]
    assert 150 <= faulted <= 250, codes
    assert all(codes[c] > 20 for c in (500, 503, 429, 409)), codes
    stats = call(sim.url + "/_kubesim/stats")[1]
    assert stats["faults"]["total"] == faulted
    assert stats["requests"]["GET"] >= 1000


def test_methods_filter_exempts_gets(sim: KubeSim) -> None:
    sim.set_faults(rate=1.0, codes=(503,), methods=("POST", "PATCH", "PUT", "DELETE"))
    assert call(sim.url + "/api/v1/nodes")[0] == 200
    code, _body, _ = call(
        sim.url + "/api/v1/namespaces/default/configmaps", "POST", {"metadata": {"name": "x"}}
    )
    assert code == 503
    sim.clear_faults()
    assert (
        call(
            sim.url + "/api/v1/namespaces/default/configmaps", "POST", {"metadata": {"name": "x"}}
        )[0]
        == 201
    )


def test_delay_only_faults(sim: KubeSim) -> None:
    sim.set_faults(rate=1.0, codes=(), delay_ms=50)
    start = time.monotonic()
    for _ in range(5):
        assert call(sim.url + "/api/v1/nodes")[0] == 200
    assert time.monotonic() - start >= 0.25


def test_admin_api_over_http(sim: KubeSim) -> None:
    code, cfg, _ = call(
        sim.url + "/_kubesim/faults", "POST", {"rate": 1.0, "codes": [429], "retry_after": 3}
    )
    assert code == 200 and cfg["rate"] == 1.0
    code, _body, headers = call(sim.url + "/api/v1/pods")
    assert code == 429 and headers["Retry-After"] == "3"
    assert call(sim.url + "/_kubesim/stats")[0] == 200  # never faulted
    assert call(sim.url + "/_kubesim/faults", "DELETE")[0] == 200
    assert call(sim.url + "/api/v1/pods")[0] == 200
    call(sim.url + "/api/v1/namespaces/default/configmaps", "POST", {"metadata": {"name": "a"}})
    assert call(sim.url + "/_kubesim/reset", "POST")[0] == 200
    assert call(sim.url + "/api/v1/namespaces/default/configmaps/a")[0] == 404
    assert len(call(sim.url + "/api/v1/nodes")[1]["items"]) == 11


def test_a_dropped_connection_gets_no_answer_and_is_in_the_history(sim: KubeSim) -> None:
    import http.client

    sim.set_faults(rate=1.0, codes=(0,))
    try:
        call(sim.url + "/api/v1/namespaces/default/configmaps")
    except (http.client.RemoteDisconnected, ConnectionError, urllib.error.URLError):
        pass
    else:
        raise AssertionError("the server answered a dropped request")
    sim.clear_faults()
    assert call(sim.url + "/api/v1/namespaces/default/configmaps")[0] == 200
    history = list(sim.faults.history)
    assert [(s.method, s.path, s.code) for s in history[-2:]] == [
        ("GET", "/api/v1/namespaces/default/configmaps", 0),
        ("GET", "/api/v1/namespaces/default/configmaps", None),
    ]


def test_max_page_caps_a_list_whatever_its_limit(sim: KubeSim) -> None:
    base = sim.url + "/api/v1/namespaces/default/configmaps"
    for i in range(5):
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"cm-{i}"}}
        assert call(base, "POST", body)[0] == 201
    sim.set_faults(rate=0.0, codes=(), max_page=2)
    _, page, _ = call(base + "?limit=500")
    assert len(page["items"]) == 2 and page["metadata"]["continue"]
    _, rest, _ = call(base + "?limit=500&continue=" + page["metadata"]["continue"])
    assert len(rest["items"]) == 2
    sim.clear_faults()
    assert len(call(base + "?limit=500")[1]["items"]) == 5


def test_a_request_in_flight_when_kubesim_restarts_is_dropped_not_applied(sim: KubeSim) -> None:
    """A stopped API server answers nothing more: a slow create still asleep in its
    injected delay when the simulator restarts without state must not land in the new
    state (it once made an orphan RayCluster after the Kubernetes API suite's restart)."""
    import http.client
    import threading

    sim.set_faults(rate=1.0, codes=(), delay_ms=600)  # delayed, then served
    outcome: list[object] = []

    def slow_create() -> None:
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "late"}}
        try:
            outcome.append(call(sim.url + "/api/v1/namespaces/default/configmaps", "POST", body))
        except (http.client.RemoteDisconnected, ConnectionError, urllib.error.URLError) as exc:
            outcome.append(exc)

    thread = threading.Thread(target=slow_create)
    thread.start()
    time.sleep(0.2)  # the create is asleep in its delay
    sim.clear_faults()
    sim.restart(keep_state=False)
    thread.join(timeout=5)
    time.sleep(0.6)  # past the delay: a create that was going to land has landed
    assert outcome and not isinstance(outcome[0], tuple), outcome
    assert call(sim.url + "/api/v1/namespaces/default/configmaps/late")[0] == 404


def test_each_request_is_seen_with_its_verb(sim: KubeSim) -> None:
    from kubesim.faults import verb_of

    assert verb_of("GET", "/api/v1/namespaces/default/pods", {}, "") == "list"
    assert verb_of("GET", "/api/v1/namespaces/default", {}, "") == "get"
    assert verb_of("GET", "/apis/ray.io/v1/rayclusters", {"watch": "true"}, "") == "watch"
    assert verb_of("GET", "/api/v1/watch/namespaces/default/pods", {}, "") == "watch"
    assert verb_of("GET", "/apis/ray.io/v1/namespaces/a/rayjobs/b", {}, "") == "get"
    assert verb_of("GET", "/api/v1/namespaces/a/pods/b/log", {}, "") == "log"
    assert verb_of("GET", "/api/v1/namespaces/a/services/s:http/proxy/x", {}, "") == "proxy"
    assert verb_of("PATCH", "/api/v1/namespaces/a", {}, "application/apply-patch+yaml") == "apply"
    assert verb_of("PATCH", "/api/v1/namespaces/a", {}, "application/merge-patch+json") == "patch"
    assert verb_of("DELETE", "/api/v1/namespaces/a", {}, "") == "delete"
    assert verb_of("POST", "/api/v1/namespaces", {}, "application/json") == "create"
    call(sim.url + "/api/v1/namespaces/default/configmaps")
    assert sim.faults.history[-1].verb == "list"


def test_rotate_floor_verb_rates_and_spared_clients(sim: KubeSim) -> None:
    base = sim.url + "/api/v1/namespaces/default/configmaps"
    # floor 2: the first two lists are faulted at rate 0; rotate: in the codes' order.
    sim.set_faults(rate=0.0, codes=(503, 500), floor=2, rotate=True)
    assert [call(base)[0] for _ in range(4)] == [503, 500, 200, 200]
    # A verb's own rate; the other verbs keep the common one.
    sim.set_faults(rate=0.0, codes=(503, 500), verb_rates={"get": 1.0}, rotate=True)
    assert call(base)[0] == 200
    # The turn is kept across settings: the next fault takes the next code.
    assert [call(base + "/missing")[0] for _ in range(3)] == [503, 500, 503]
    # A spared client is never faulted.
    sim.set_faults(rate=1.0, codes=(503,), spare=["the-test"])
    req = urllib.request.Request(base, headers={"User-Agent": "the-test"})
    with urllib.request.urlopen(req) as resp:
        assert resp.status == 200
    assert call(base)[0] == 503


def test_410_is_injected_on_watches_only_as_an_error_event(sim: KubeSim) -> None:
    base = sim.url + "/api/v1/namespaces/default/configmaps"
    sim.set_faults(rate=1.0, codes=(410,))
    assert call(base)[0] == 200  # not a watch: 410 is not among its codes
    with urllib.request.urlopen(base + "?watch=true&resourceVersion=1") as resp:
        assert resp.status == 200
        event = json.loads(resp.readline())
    assert event["type"] == "ERROR"
    assert event["object"]["code"] == 410 and event["object"]["reason"] == "Expired"
    assert "too old resource version" in event["object"]["message"]


def test_reset_sends_half_an_answer_and_carries_the_request_out(sim: KubeSim) -> None:
    import http.client

    from kubesim.faults import RESET

    sim.set_faults(rate=1.0, codes=(RESET,))
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cut"}}
    try:
        call(sim.url + "/api/v1/namespaces/default/configmaps", "POST", body)
    except (http.client.IncompleteRead, ConnectionError) as exc:
        assert not isinstance(exc, http.client.IncompleteRead) or exc.partial
    else:
        raise AssertionError("the whole answer came")
    sim.clear_faults()
    assert call(sim.url + "/api/v1/namespaces/default/configmaps/cut")[0] == 200
    assert sim.faults.stats()["faults"]["reset"] == 1


def test_break_watches_cuts_open_streams_without_their_end(sim: KubeSim) -> None:
    import http.client
    import threading

    outcome: list[object] = []

    def watch() -> None:
        url = sim.url + "/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=30"
        try:
            with urllib.request.urlopen(url) as resp:
                outcome.append(resp.read())
        except (http.client.IncompleteRead, ConnectionError) as exc:
            outcome.append(exc)

    thread = threading.Thread(target=watch)
    thread.start()
    while sim.active_watches < 1:
        time.sleep(0.05)
    assert sim.break_watches() == 1
    thread.join(timeout=10)
    assert not thread.is_alive()
    assert isinstance(outcome[0], http.client.IncompleteRead | ConnectionError), outcome
