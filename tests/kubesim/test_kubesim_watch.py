"""The WATCH verb of kubesim: the official client's Watch, raw streams (bookmarks, WatchList,
Table events, errors), and kubectl's watches (``get -w``, ``wait``).

No assertion is timed: timeouts are only upper bounds, so that a broken watch fails the
test instead of hanging it. Writes are made before a watch from an earlier
resourceVersion is opened wherever possible, which makes the order deterministic.
"""

from __future__ import annotations

import http.client
import json
import os
import queue
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException
from kubesim_helpers import pod_manifest, raycluster

from kubesim import KubeSim
from kubesim.store import Store

KUBECTL = shutil.which("kubectl", path=str(Path(sys.executable).parent)) or shutil.which("kubectl")
UPPER_BOUND = 20.0  # seconds: only ever a bound, never something a test waits out


# -- helpers ----------------------------------------------------------------------------


def _list_rv(core: client.CoreV1Api, ns: str = "default") -> str:
    """The resourceVersion of a pod list, where a client's watch would start."""
    return str(core.list_namespaced_pod(ns).metadata.resource_version)


def _events(
    func: Callable[..., Any], *args: Any, until: Callable[[dict[str, Any]], bool], **kw: Any
) -> list[dict[str, Any]]:
    """The official client's Watch events until one satisfies ``until``."""
    w = watch.Watch()
    seen = []
    for event in w.stream(func, *args, timeout_seconds=int(UPPER_BOUND), **kw):
        seen.append(event)
        if until(event):
            w.stop()
    return seen


class RawWatch:
    """A watch opened with plain HTTP, read event by event (JSON lines)."""

    def __init__(self, sim: KubeSim, path: str, accept: str = "application/json") -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", sim.port, timeout=UPPER_BOUND)
        self.conn.request("GET", path, headers={"Accept": accept})
        self.resp = self.conn.getresponse()
        self.status = self.resp.status

    def next(self) -> dict[str, Any] | None:
        """The next event, or None once the server ended the stream."""
        line = self.resp.readline()
        return json.loads(line) if line else None

    def take(self, count: int) -> list[dict[str, Any]]:
        """The next ``count`` events."""
        out = []
        for _ in range(count):
            event = self.next()
            assert event is not None, f"the stream ended after {out}"
            out.append(event)
        return out

    def close(self) -> None:
        self.conn.close()


@pytest.fixture
def raw(sim: KubeSim) -> Iterator[Callable[..., RawWatch]]:
    """Open raw watches on the simulator; all closed at the end."""
    opened: list[RawWatch] = []

    def open_watch(path: str, accept: str = "application/json") -> RawWatch:
        w = RawWatch(sim, path, accept)
        opened.append(w)
        return w

    yield open_watch
    for w in opened:
        w.close()


def _eventually(check: Callable[[], bool]) -> None:
    """Poll ``check`` until true; fail after the upper bound."""
    give_up = time.monotonic() + UPPER_BOUND
    while not check():
        assert time.monotonic() < give_up, "condition not reached"
        time.sleep(0.02)


def _names(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["type"], e["object"]["metadata"]["name"]) for e in events]


# -- the store's history ----------------------------------------------------------------


def test_store_records_changes_and_removal_takes_a_resource_version() -> None:
    store = Store(history_size=3)
    obj = {"metadata": {"name": "a", "namespace": "n", "uid": "u", "resourceVersion": "1"}}
    store.rv = 1
    store.put("pods", obj)
    new = {"metadata": {**obj["metadata"], "resourceVersion": store.next_rv()}}
    store.put("pods", new)
    store.remove("pods", "n", "a")
    assert [(c.rv, c.type) for c in store.history] == [
        (1, "ADDED"),
        (2, "MODIFIED"),
        (3, "DELETED"),
    ]
    assert store.history[1].prev is obj
    # Bounded: the oldest change goes, and the floor says from where the history is whole.
    store.put("pods", {"metadata": {**obj["metadata"], "resourceVersion": store.next_rv()}})
    assert len(store.history) == 3 and store.floor == 1
    assert store.changes_since(store.changes_after(2)) == list(store.history)[1:]


# -- the official client ----------------------------------------------------------------


def test_client_watch_sees_added_modified_deleted_in_order(core: client.CoreV1Api) -> None:
    rv = _list_rv(core)
    core.create_namespaced_pod("default", pod_manifest("w1"))
    core.patch_namespaced_pod("w1", "default", {"metadata": {"labels": {"stage": "two"}}})
    core.delete_namespaced_pod("w1", "default")
    events = _events(
        core.list_namespaced_pod,
        "default",
        resource_version=rv,
        until=lambda e: e["type"] == "DELETED",
    )
    assert [(e["type"], e["object"].metadata.name) for e in events] == [
        ("ADDED", "w1"),
        ("MODIFIED", "w1"),
        ("DELETED", "w1"),
    ]
    versions = [int(e["object"].metadata.resource_version) for e in events]
    assert versions == sorted(versions) and len(set(versions)) == 3 and versions[0] > int(rv)
    # The scheduler and kubelet changed the pod in place within its create: their states
    # arrive merged into the ADDED event (see kubesim/watch.py).
    assert events[0]["object"].spec.node_name and events[0]["object"].status.phase == "Running"
    assert events[1]["object"].metadata.labels == {"stage": "two"}


def test_watch_without_resource_version_starts_with_the_current_objects(
    core: client.CoreV1Api,
) -> None:
    for name in ("b", "a"):
        core.create_namespaced_pod("default", pod_manifest(name))
    w = watch.Watch()
    events = []
    for event in w.stream(core.list_namespaced_pod, "default", timeout_seconds=int(UPPER_BOUND)):
        events.append(event)
        if len(events) == 2:
            w.stop()
    assert [(e["type"], e["object"].metadata.name) for e in events] == [
        ("ADDED", "a"),
        ("ADDED", "b"),
    ]


def test_selector_turns_leaving_into_deleted_and_entering_into_added(
    core: client.CoreV1Api,
) -> None:
    rv = _list_rv(core)
    core.create_namespaced_pod("default", pod_manifest("other"))  # never matches
    pod = pod_manifest("sel")
    pod["metadata"]["labels"] = {"app": "a"}
    core.create_namespaced_pod("default", pod)
    core.patch_namespaced_pod("sel", "default", {"metadata": {"labels": {"app": "b"}}})
    core.patch_namespaced_pod("sel", "default", {"metadata": {"labels": {"app": "a"}}})
    core.patch_namespaced_pod("sel", "default", {"metadata": {"labels": {"app": "a", "x": "y"}}})
    events = _events(
        core.list_namespaced_pod,
        "default",
        resource_version=rv,
        label_selector="app=a",
        until=lambda e: e["type"] == "MODIFIED",
    )
    assert [(e["type"], e["object"].metadata.name) for e in events] == [
        ("ADDED", "sel"),
        ("DELETED", "sel"),
        ("ADDED", "sel"),
        ("MODIFIED", "sel"),
    ]
    leaving = events[1]["object"]
    # As the watch cache: the state before it left, with the event's resourceVersion.
    assert leaving.metadata.labels == {"app": "a"}
    assert int(leaving.metadata.resource_version) > int(
        events[0]["object"].metadata.resource_version
    )


def test_field_selector_on_a_field_the_kind_lacks_is_400(raw: Callable[..., RawWatch]) -> None:
    w = raw("/api/v1/pods?watch=true&fieldSelector=spec.nope%3Dx")
    assert w.status == 400
    assert json.loads(w.resp.read())["message"] == "field label not supported: spec.nope"


def test_history_truncated_answers_410_expired(tmp_path: Path) -> None:
    with KubeSim(watch_history=5) as small:
        api = config.new_client_from_config(config_file=small.write_kubeconfig(str(tmp_path / "k")))
        core = client.CoreV1Api(api)
        rv = _list_rv(core)
        for i in range(4):
            core.create_namespaced_pod("default", pod_manifest(f"p{i}"))
        with pytest.raises(ApiException) as exc:
            _events(core.list_namespaced_pod, "default", resource_version=rv, until=lambda e: True)
        assert exc.value.status == 410
        assert exc.value.reason.startswith(f"Expired: too old resource version: {rv} (")
        api.close()


def test_custom_resources_are_watched(custom: client.CustomObjectsApi) -> None:
    listed = custom.list_namespaced_custom_object("ray.io", "v1", "default", "rayclusters")
    rv = listed["metadata"]["resourceVersion"]
    custom.create_namespaced_custom_object(
        "ray.io", "v1", "default", "rayclusters", raycluster("rc")
    )
    events = _events(
        custom.list_namespaced_custom_object,
        "ray.io",
        "v1",
        "default",
        "rayclusters",
        resource_version=rv,
        until=lambda e: e["object"].get("status", {}).get("state") == "ready",
    )
    assert events[0]["type"] == "ADDED" and events[0]["object"]["kind"] == "RayCluster"
    assert {e["type"] for e in events[1:]} <= {"MODIFIED"}


def test_namespaced_watch_sees_only_its_namespace(
    core: client.CoreV1Api, raw: Callable[..., RawWatch]
) -> None:
    rv = _list_rv(core)
    core.create_namespace({"metadata": {"name": "elsewhere"}})
    core.create_namespaced_pod("elsewhere", pod_manifest("far", namespace="elsewhere"))
    core.create_namespaced_pod("default", pod_manifest("near"))
    scoped = raw(f"/api/v1/namespaces/default/pods?watch=1&resourceVersion={rv}")
    assert _names(scoped.take(1)) == [("ADDED", "near")]
    everywhere = raw(f"/api/v1/watch/pods?resourceVersion={rv}")  # the legacy path
    assert _names(everywhere.take(2)) == [("ADDED", "far"), ("ADDED", "near")]


# -- bookmarks, WatchList, timeouts -----------------------------------------------------


def test_bookmarks_come_every_interval(tmp_path: Path) -> None:
    with KubeSim(watch_bookmark_interval=0.05) as fast:
        w = RawWatch(fast, "/api/v1/pods?watch=1&resourceVersion=1&allowWatchBookmarks=true")
        events = [e for e in (w.next() for _ in range(40)) if e and e["type"] == "BOOKMARK"][:2]
        w.close()
    assert len(events) == 2
    assert events[0]["object"] == {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {"resourceVersion": events[0]["object"]["metadata"]["resourceVersion"]},
    }


def test_a_bookmark_comes_just_before_the_timeout(
    raw: Callable[..., RawWatch], sim: KubeSim
) -> None:
    rv = sim.store.rv
    w = raw(f"/api/v1/pods?watch=1&resourceVersion={rv}&allowWatchBookmarks=true&timeoutSeconds=3")
    assert w.next() == {
        "type": "BOOKMARK",
        "object": {"kind": "Pod", "apiVersion": "v1", "metadata": {"resourceVersion": str(rv)}},
    }
    assert w.next() is None  # then the stream ends


def test_send_initial_events_ends_them_with_a_bookmark(
    core: client.CoreV1Api, raw: Callable[..., RawWatch]
) -> None:
    core.create_namespaced_pod("default", pod_manifest("one"))
    w = raw(
        "/api/v1/namespaces/default/pods?watch=true&sendInitialEvents=true"
        "&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"
    )
    added, end = w.take(2)
    assert (added["type"], added["object"]["metadata"]["name"]) == ("ADDED", "one")
    assert end["type"] == "BOOKMARK"
    assert end["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    core.delete_namespaced_pod("one", "default")
    assert _names(w.take(1)) == [("DELETED", "one")]


@pytest.mark.parametrize(
    ("query", "message"),
    [
        (
            "sendInitialEvents=true",
            "resourceVersionMatch: Forbidden: sendInitialEvents requires setting "
            "resourceVersionMatch to NotOlderThan",
        ),
        (
            "resourceVersion=5&resourceVersionMatch=NotOlderThan",
            "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch "
            "unless sendInitialEvents is provided",
        ),
    ],
)
def test_watch_list_rules_are_the_api_servers(
    raw: Callable[..., RawWatch], query: str, message: str
) -> None:
    w = raw(f"/api/v1/pods?watch=true&{query}")
    body = json.loads(w.resp.read())
    # ValidateListOptions errors are 422 Invalid on ListOptions, before any event.
    assert (w.status, body["reason"]) == (422, "Invalid")
    assert body["message"] == f'ListOptions.meta.k8s.io "" is invalid: {message}'


def test_resource_version_must_be_an_integer(raw: Callable[..., RawWatch]) -> None:
    w = raw("/api/v1/pods?watch=true&resourceVersion=abc")
    assert w.status == 400


def test_timeout_seconds_ends_the_stream(raw: Callable[..., RawWatch], sim: KubeSim) -> None:
    w = raw(f"/api/v1/pods?watch=true&resourceVersion={sim.store.rv}&timeoutSeconds=1")
    assert w.status == 200
    assert w.next() is None


def test_a_client_leaving_frees_its_server_thread(
    raw: Callable[..., RawWatch], sim: KubeSim
) -> None:
    w = raw(f"/api/v1/pods?watch=true&resourceVersion={sim.store.rv}")
    _eventually(lambda: sim.active_watches == 1)
    w.close()
    _eventually(lambda: sim.active_watches == 0)


def test_table_events_carry_column_definitions_once(
    core: client.CoreV1Api, raw: Callable[..., RawWatch]
) -> None:
    for name in ("t1", "t2"):
        core.create_namespaced_pod("default", pod_manifest(name))
    w = raw(
        "/api/v1/namespaces/default/pods?watch=true",
        accept="application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
    )
    first, second = w.take(2)
    assert first["object"]["kind"] == "Table"
    assert [c["name"] for c in first["object"]["columnDefinitions"]][:3] == [
        "Name",
        "Ready",
        "Status",
    ]
    assert second["object"]["columnDefinitions"] is None
    assert second["object"]["rows"][0]["cells"][:3] == ["t2", "1/1", "Running"]
    assert second["object"]["rows"][0]["object"]["kind"] == "PartialObjectMetadata"


def test_watch_on_a_named_object_is_a_plain_get(core: client.CoreV1Api, sim: KubeSim) -> None:
    core.create_namespaced_pod("default", pod_manifest("solo"))
    conn = http.client.HTTPConnection("127.0.0.1", sim.port, timeout=UPPER_BOUND)
    conn.request("GET", "/api/v1/namespaces/default/pods/solo?watch=true")
    assert json.loads(conn.getresponse().read())["kind"] == "Pod"
    conn.close()


# -- kubectl ----------------------------------------------------------------------------


def _kubectl_proc(kubeconfig_path: str, tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    if KUBECTL is None:
        pytest.skip("kubectl is not installed")
    env = dict(os.environ, KUBECONFIG=kubeconfig_path, HOME=str(tmp_path))
    return subprocess.Popen(
        [str(KUBECTL), "--cache-dir", str(tmp_path / "kube-cache"), *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _lines(proc: subprocess.Popen[str]) -> queue.Queue[str]:
    """kubectl's output lines, read by a thread (so that reads can be bounded)."""
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)

    threading.Thread(target=pump, daemon=True).start()
    return lines


def _line_with(lines: queue.Queue[str], text: str) -> str:
    give_up = time.monotonic() + UPPER_BOUND
    while True:
        line = lines.get(timeout=max(0.0, give_up - time.monotonic()))
        if text in line:
            return line


def test_kubectl_get_watch_shows_a_new_pod(
    core: client.CoreV1Api, kubeconfig_path: str, tmp_path: Path
) -> None:
    core.create_namespaced_pod("default", pod_manifest("before"))
    proc = _kubectl_proc(kubeconfig_path, tmp_path, "get", "pods", "-w", "--request-timeout=30s")
    try:
        lines = _lines(proc)
        _line_with(lines, "before")  # the list: kubectl's watch starts after it
        core.create_namespaced_pod("default", pod_manifest("after"))
        row = _line_with(lines, "after").split()
        assert row[:3] == ["after", "1/1", "Running"]
    finally:
        proc.kill()
        proc.communicate()


def test_kubectl_wait_for_delete_and_condition(
    core: client.CoreV1Api,
    sim: KubeSim,
    kubectl: Callable[..., subprocess.CompletedProcess[str]],
    kubeconfig_path: str,
    tmp_path: Path,
) -> None:
    core.create_namespaced_pod("default", pod_manifest("gone"))
    ready = kubectl("wait", "--for=condition=Ready", "pod/gone", "--timeout=20s")
    assert ready.stdout.strip() == "pod/gone condition met"
    _eventually(lambda: sim.active_watches == 0)  # that wait's watch has been closed
    proc = _kubectl_proc(
        kubeconfig_path, tmp_path, "wait", "--for=delete", "pod/gone", "--timeout=30s"
    )
    try:
        _eventually(lambda: sim.active_watches >= 1)  # kubectl is watching the pod
        core.delete_namespaced_pod("gone", "default")
        out, err = proc.communicate(timeout=UPPER_BOUND)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert out.strip() == "pod/gone condition met"
