"""Events as kube-apiserver keeps them: expiry after ``--event-ttl`` (driven by a manual
clock, no sleeping), field selectors limited to the labels each kind supports with the API
server's 400 wording, and reads served from the encoded-JSON cache staying current."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator

import pytest
from kubernetes import client, config
from kubernetes.client.rest import ApiException
from kubesim_helpers import pod_manifest, raycluster

from kubesim import KubeSim
from kubesim.__main__ import parse_args
from kubesim.clock import ManualClock
from kubesim.cluster import DEFAULT_EVENT_TTL, Cluster

FAILED = "involvedObject.kind=Pod,reason=FailedScheduling"


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def ttl_sim(clock: ManualClock) -> Iterator[KubeSim]:
    """A simulator whose events live 60 s on a clock the test moves."""
    s = KubeSim(startup_delay=0.0, event_ttl=60, clock=clock).start()
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture
def ttl_core(ttl_sim: KubeSim, tmp_path: object) -> Iterator[client.CoreV1Api]:
    path = ttl_sim.write_kubeconfig(f"{tmp_path}/kubeconfig")
    api = config.new_client_from_config(config_file=path)
    try:
        yield client.CoreV1Api(api)
    finally:
        api.close()


def _message(exc: ApiException) -> str:
    return str(json.loads(exc.body)["message"])


# -- TTL -----------------------------------------------------------------------------------


def test_events_expire_after_the_ttl(
    ttl_sim: KubeSim, ttl_core: client.CoreV1Api, clock: ManualClock
) -> None:
    ttl_core.create_namespaced_pod("default", pod_manifest("big", gpu=64, tolerate=True))
    events = ttl_core.list_namespaced_event("default", field_selector=FAILED).items
    assert [e.involved_object.name for e in events] == ["big"]
    name = events[0].metadata.name

    clock.advance(59)
    assert ttl_core.read_namespaced_event(name, "default").reason == "FailedScheduling"

    clock.advance(2)
    assert ttl_core.list_namespaced_event("default", field_selector=FAILED).items == []
    with pytest.raises(ApiException) as err:
        ttl_core.read_namespaced_event(name, "default")
    assert err.value.status == 404
    assert ttl_sim.get("events", "default", name) is None
    # The pod itself is untouched: only its event went.
    assert ttl_core.read_namespaced_pod("big", "default").status.phase == "Pending"


def test_a_repeat_restarts_the_ttl(ttl_sim: KubeSim, clock: ManualClock) -> None:
    cluster = ttl_sim.cluster
    with cluster.lock:
        ns = cluster.store.get("namespaces", "", "default")
        assert ns is not None
        cluster.record_event(ns, "Normal", "Poked", "first", "test")
    clock.advance(50)
    with cluster.lock:
        cluster.record_event(ns, "Normal", "Poked", "second", "test")
    clock.advance(50)  # 100 s after the first write, 50 s after the last
    cluster.tick()
    [ev] = [e for e in ttl_sim.list("events", "default") if e["reason"] == "Poked"]
    assert (ev["count"], ev["message"]) == (2, "second")
    clock.advance(11)
    cluster.tick()  # the ticker expires events too, without any request
    assert [e for e in ttl_sim.list("events", "default") if e["reason"] == "Poked"] == []


def test_a_deleted_event_is_forgotten_by_expiry(ttl_sim: KubeSim, clock: ManualClock) -> None:
    cluster = ttl_sim.cluster
    with cluster.lock:
        ns = cluster.store.get("namespaces", "", "default")
        assert ns is not None
        cluster.record_event(ns, "Normal", "Poked", "first", "test")
        [ev] = [e for e in cluster.store.iter("events", "default") if e["reason"] == "Poked"]
        cluster.remove_object(cluster.rt("events"), ev)
    clock.advance(61)
    assert cluster.expire_events() == 0


def test_default_ttl_is_an_hour_and_must_be_positive() -> None:
    assert DEFAULT_EVENT_TTL == 3600
    with pytest.raises(ValueError):
        Cluster(event_ttl=0)


def test_event_ttl_flag() -> None:
    assert parse_args([]).event_ttl == 3600
    assert parse_args(["--event-ttl", "120"]).event_ttl == 120
    assert parse_args(["--event-ttl=0.5"]).event_ttl == 0.5
    for bad in ("0", "-3", "an-hour"):
        with pytest.raises(SystemExit):
            parse_args(["--event-ttl", bad])


# -- field selectors -----------------------------------------------------------------------


def test_failed_scheduling_selector(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod("default", pod_manifest("big", gpu=64, tolerate=True))
    core.create_namespaced_pod("default", pod_manifest("small"))
    every = core.list_event_for_all_namespaces().items
    assert {e.reason for e in every} >= {"FailedScheduling", "Scheduled"}

    failed = core.list_event_for_all_namespaces(field_selector=FAILED).items
    assert [(e.involved_object.name, e.reason) for e in failed] == [("big", "FailedScheduling")]
    assert core.list_namespaced_event("default", field_selector=FAILED).items == failed

    scheduled = core.list_namespaced_event(
        "default", field_selector="reason!=FailedScheduling,involvedObject.kind=Pod"
    ).items
    assert {e.involved_object.name for e in scheduled} == {"small"}
    warnings = core.list_namespaced_event("default", field_selector="type=Warning").items
    assert {e.reason for e in warnings} == {"FailedScheduling"}
    by_source = core.list_namespaced_event(
        "default", field_selector="source=default-scheduler,involvedObject.name=small"
    ).items
    assert [e.reason for e in by_source] == ["Scheduled"]
    by_uid = core.list_namespaced_event(
        "default",
        field_selector=f"involvedObject.uid={failed[0].involved_object.uid}",
    ).items
    assert [e.reason for e in by_uid] == ["FailedScheduling"]


def test_pod_field_labels(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod("default", pod_manifest("big", gpu=64, tolerate=True))
    core.create_namespaced_pod("default", pod_manifest("small"))
    pending = core.list_namespaced_pod("default", field_selector="status.phase=Pending").items
    assert [p.metadata.name for p in pending] == ["big"]
    node = core.read_namespaced_pod("small", "default").spec.node_name
    for label in ("spec.nodeName", "spec.host"):  # spec.host: the old name, still accepted
        on_node = core.list_namespaced_pod("default", field_selector=f"{label}={node}").items
        assert [p.metadata.name for p in on_node] == ["small"]


@pytest.mark.parametrize(
    ("call", "label", "message"),
    [
        ("event", "spec.foo", "field label not supported: spec.foo"),
        ("event", "message", "field label not supported: message"),
        ("pod", "spec.containers", "field label not supported: spec.containers"),
        ("node", "metadata.namespace", "field label not supported: metadata.namespace"),
        (
            "configmap",
            "data.key",
            '"data.key" is not a known field selector: only "metadata.name", "metadata.namespace"',
        ),
    ],
)
def test_unsupported_field_label_is_400(
    core: client.CoreV1Api, call: str, label: str, message: str
) -> None:
    lister = {
        "event": lambda fs: core.list_namespaced_event("default", field_selector=fs),
        "pod": lambda fs: core.list_namespaced_pod("default", field_selector=fs),
        "node": lambda fs: core.list_node(field_selector=fs),
        "configmap": lambda fs: core.list_namespaced_config_map("default", field_selector=fs),
    }[call]
    with pytest.raises(ApiException) as err:
        lister(f"{label}=x")
    assert err.value.status == 400
    body = json.loads(err.value.body)
    assert (body["kind"], body["reason"], body["message"]) == ("Status", "BadRequest", message)


def test_custom_resource_field_labels(custom: client.CustomObjectsApi) -> None:
    custom.create_namespaced_custom_object(
        "ray.io", "v1", "default", "rayclusters", raycluster("rc", workers=1, gpus=1)
    )
    found = custom.list_namespaced_custom_object(
        "ray.io", "v1", "default", "rayclusters", field_selector="metadata.name=rc"
    )
    assert [o["metadata"]["name"] for o in found["items"]] == ["rc"]
    with pytest.raises(ApiException) as err:
        custom.list_namespaced_custom_object(
            "ray.io", "v1", "default", "rayclusters", field_selector="spec.suspend=true"
        )
    assert err.value.status == 400
    assert _message(err.value) == "field label not supported: spec.suspend"


# -- encoded-JSON cache --------------------------------------------------------------------


def test_list_and_get_show_each_write(core: client.CoreV1Api) -> None:
    core.create_namespaced_config_map("default", {"metadata": {"name": "cm"}, "data": {"v": "1"}})
    assert core.list_namespaced_config_map("default").items[0].data == {"v": "1"}
    assert core.read_namespaced_config_map("cm", "default").data == {"v": "1"}

    core.patch_namespaced_config_map("cm", "default", {"data": {"v": "2"}})
    listed = core.list_namespaced_config_map("default").items
    assert [c.data for c in listed] == [{"v": "2"}]
    assert core.read_namespaced_config_map("cm", "default").data == {"v": "2"}

    old_uid = listed[0].metadata.uid
    core.delete_namespaced_config_map("cm", "default")
    assert core.list_namespaced_config_map("default").items == []
    core.create_namespaced_config_map("default", {"metadata": {"name": "cm"}, "data": {"v": "3"}})
    [again] = core.list_namespaced_config_map("default").items
    assert again.metadata.uid != old_uid and again.data == {"v": "3"}


def test_controller_writes_reach_lists(core: client.CoreV1Api) -> None:
    """A pod listed Pending is listed Running once the scheduler and kubelet wrote it:
    controller writes invalidate the cache as API writes do."""
    for i in range(5):  # the demo fleet has 4 nodes of 8 H100: the fifth waits
        core.create_namespaced_pod("default", pod_manifest(f"w{i}", gpu=8, tolerate=True))
    phases = {p.metadata.name: p.status.phase for p in core.list_namespaced_pod("default").items}
    assert sorted(phases.values()) == ["Pending", "Running", "Running", "Running", "Running"]
    [waiting] = [n for n, ph in phases.items() if ph == "Pending"]
    running = next(n for n, ph in phases.items() if ph == "Running")
    core.delete_namespaced_pod(running, "default")
    listed = core.list_namespaced_pod("default", field_selector=f"metadata.name={waiting}")
    assert listed.items[0].status.phase == "Running"
    assert core.read_namespaced_pod(waiting, "default").status.phase == "Running"


def test_table_rows_carry_metadata_unless_object_is_asked(
    sim: KubeSim, core: client.CoreV1Api
) -> None:
    core.create_namespaced_pod("default", pod_manifest("small"))
    accept = "application/json;as=Table;v=v1;g=meta.k8s.io"

    def rows(query: str) -> list[dict[str, object]]:
        req = urllib.request.Request(
            f"{sim.url}/api/v1/namespaces/default/pods{query}", headers={"Accept": accept}
        )
        with urllib.request.urlopen(req) as resp:
            return list(json.loads(resp.read())["rows"])

    [row] = rows("")
    assert row["object"] == {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": sim.get("pods", "default", "small")["metadata"],  # type: ignore[index]
    }
    [row] = rows("?includeObject=Object")
    assert row["object"]["kind"] == "Pod"  # type: ignore[index]
    [row] = rows("?includeObject=None")
    assert "object" not in row


def test_waiting_pods_are_retried_every_five_minutes(clock: ManualClock, tmp_path: object) -> None:
    """kube-scheduler retries unschedulable pods at least every 5 minutes and reports each
    failure again, so a pod waiting longer than the event TTL keeps its event."""
    sim = KubeSim(startup_delay=0.0, event_ttl=400, clock=clock).start()
    api = config.new_client_from_config(config_file=sim.write_kubeconfig(f"{tmp_path}/kc"))
    try:
        core = client.CoreV1Api(api)
        for name in ("big-a", "big-b"):  # same requirements: one scheduling group
            core.create_namespaced_pod("default", pod_manifest(name, gpu=64, tolerate=True))

        def counts() -> dict[str, int]:
            events = core.list_namespaced_event("default", field_selector=FAILED).items
            return {e.involved_object.name: e.count for e in events}

        assert counts() == {"big-a": 1, "big-b": 1}
        clock.advance(299)
        sim.cluster.tick()
        assert counts() == {"big-a": 1, "big-b": 1}
        clock.advance(1)
        sim.cluster.tick()
        assert counts() == {"big-a": 2, "big-b": 2}
        # Twenty minutes on (three times the TTL), the events are still there, renewed.
        for _ in range(4):
            clock.advance(300)
            sim.cluster.tick()
        assert counts() == {"big-a": 6, "big-b": 6}
    finally:
        api.close()
        sim.stop()
