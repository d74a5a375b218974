"""The kubelet's side of a pod's life, read as a user reads it — kubectl and the official
client over HTTP: pull/create/start events, an image the simulated registry lacks, a
container that crashes or is OOM-killed and restarts with back-off, a node that stops
being ready. The knobs are kubesim's documented ones (README, "Pod failures"), set over
its admin API as ``make run``'s users would. Time is a ManualClock moved by hand."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Callable
from typing import Any

from kubernetes import client
from kubesim_helpers import pod_manifest

from kubesim import KubeSim
from kubesim.clock import ManualClock
from tests.kubesim import manual_clock

clock = manual_clock.clock
sim = manual_clock.sim
advance = manual_clock.advance

NS = "default"


def _admin(sim: KubeSim, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    req = urllib.request.Request(
        sim.url + path,
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _events(core: client.CoreV1Api, pod: str) -> dict[tuple[str, str], client.CoreV1Event]:
    items = core.list_namespaced_event(
        NS, field_selector=f"involvedObject.name={pod},involvedObject.kind=Pod"
    ).items
    return {(e.reason, e.involved_object.field_path or ""): e for e in items}


def _messages(core: client.CoreV1Api, pod: str, reason: str) -> list[str]:
    """The messages of a pod's Warning events of ``reason``, the longest first."""
    items = core.list_namespaced_event(
        NS, field_selector=f"involvedObject.name={pod},involvedObject.kind=Pod"
    ).items
    found = [e.message for e in items if e.reason == reason and e.type == "Warning"]
    return sorted(found, key=len, reverse=True)


def _container(core: client.CoreV1Api, pod: str) -> Any:
    return core.read_namespaced_pod(pod, NS).status.container_statuses[0]


def test_a_pod_starts_with_the_kubelets_events(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod(NS, pod_manifest("a", image="registry.example/app:1"))
    pod = core.read_namespaced_pod("a", NS)
    assert pod.status.phase == "Running" and pod.status.container_statuses[0].ready
    events = _events(core, "a")
    field = "spec.containers{main}"
    assert {r for r, _ in events} == {"Scheduled", "Pulling", "Pulled", "Created", "Started"}
    pulled = events[("Pulled", field)]
    assert pulled.source.component == "kubelet" and pulled.source.host == pod.spec.node_name
    assert pulled.message == 'Successfully pulled image "registry.example/app:1"'
    assert events[("Started", field)].message == "Started container main"
    # A second pod on the same node finds the image there.
    second = pod_manifest("b", image="registry.example/app:1", nodeName=pod.spec.node_name)
    core.create_namespaced_pod(NS, second)
    pulled_b = _events(core, "b")[("Pulled", field)]
    assert pulled_b.message == 'Container image "registry.example/app:1" already present on machine'
    assert ("Pulling", field) not in _events(core, "b")


def test_an_image_the_registry_lacks_backs_off(
    core: client.CoreV1Api, sim: KubeSim, clock: ManualClock, kubectl: Callable[..., Any]
) -> None:
    status, body = _admin(sim, "/_kubesim/registry/missing", {"images": ["team/ray:nope*"]})
    assert status == 200 and body["missing"] == ["team/ray:nope*"]
    core.create_namespaced_pod(NS, pod_manifest("p", image="team/ray:nope-1"))
    core.create_namespaced_pod(NS, pod_manifest("q", image="ghcr.invalid/x/y:1"))
    for name, image in (("p", "team/ray:nope-1"), ("q", "ghcr.invalid/x/y:1")):
        pod = core.read_namespaced_pod(name, NS)
        waiting = pod.status.container_statuses[0].state.waiting
        assert pod.status.phase == "Pending" and waiting.reason == "ErrImagePull"
        assert "not found" in waiting.message
        failed = _messages(core, name, "Failed")
        assert failed[0].startswith(f'Failed to pull image "{image}": rpc error: code = NotFound')
        assert failed[1:] == ["Error: ErrImagePull"]
    advance(sim, clock, 1.5)
    waiting = _container(core, "p").state.waiting
    assert waiting.reason == "ImagePullBackOff"
    assert waiting.message == 'Back-off pulling image "team/ray:nope-1"'
    # kubectl shows the reason in STATUS, as for a real cluster.
    out = kubectl("get", "pod", "p", "-o", "jsonpath={.status.containerStatuses[0].state}").stdout
    assert "ImagePullBackOff" in out
    # The back-off passes, the pull is tried again and fails again.
    advance(sim, clock, 10.5)
    assert _container(core, "p").state.waiting.reason == "ErrImagePull"
    assert _events(core, "p")[("Pulling", "spec.containers{main}")].count == 2
    # The image appears in the registry: the next try pulls it and the pod runs.
    _admin(sim, "/_kubesim/registry/missing", {"images": []})
    advance(sim, clock, 1.5)
    advance(sim, clock, 20.5)
    pod = core.read_namespaced_pod("p", NS)
    assert pod.status.phase == "Running" and pod.status.container_statuses[0].ready


def test_a_crashing_container_loops_with_back_off(
    core: client.CoreV1Api, sim: KubeSim, clock: ManualClock
) -> None:
    crash = pod_manifest("c")
    crash["metadata"]["annotations"] = {"kubesim.io/container-fault": "crash"}
    core.create_namespaced_pod(NS, crash)
    assert _container(core, "c").state.running
    advance(sim, clock, 1.5)
    cs = _container(core, "c")
    assert cs.state.waiting.reason == "CrashLoopBackOff" and cs.restart_count == 0
    assert "back-off 10s restarting failed container=main" in cs.state.waiting.message
    assert cs.last_state.terminated.reason == "Error" and cs.last_state.terminated.exit_code == 1
    pod = core.read_namespaced_pod("c", NS)
    ready = {c.type: c for c in pod.status.conditions}["Ready"]
    assert pod.status.phase == "Running" and ready.status == "False"
    assert ready.reason == "ContainersNotReady"
    backoff = _events(core, "c")[("BackOff", "spec.containers{main}")]
    assert backoff.type == "Warning" and "Back-off restarting failed container main" in (
        backoff.message
    )
    advance(sim, clock, 10.5)  # restarted, then crashes again: the back-off doubles
    assert _container(core, "c").restart_count == 1
    advance(sim, clock, 1.5)
    assert "back-off 20s" in _container(core, "c").state.waiting.message


def test_oom_kills_by_label_selector_and_never_restart(
    core: client.CoreV1Api, sim: KubeSim, clock: ManualClock
) -> None:
    body = {"namespace": NS, "selector": "app=trainer", "fault": "oom"}
    assert _admin(sim, "/_kubesim/container-faults", body)[0] == 200
    bad = {"namespace": NS, "selector": "app in (x)", "fault": "oom"}
    status, error = _admin(sim, "/_kubesim/container-faults", bad)
    assert status == 400 and "key=value" in error["message"]
    for name, policy in (("t1", "Always"), ("t2", "Never")):
        manifest = pod_manifest(name, restartPolicy=policy)
        manifest["metadata"]["labels"] = {"app": "trainer"}
        core.create_namespaced_pod(NS, manifest)
    core.create_namespaced_pod(NS, pod_manifest("other"))
    advance(sim, clock, 1.5)
    looping = _container(core, "t1")
    assert looping.last_state.terminated.reason == "OOMKilled"
    assert looping.last_state.terminated.exit_code == 137
    assert looping.state.waiting.reason == "CrashLoopBackOff"
    ended = core.read_namespaced_pod("t2", NS)
    assert ended.status.phase == "Failed"
    assert ended.status.container_statuses[0].state.terminated.reason == "OOMKilled"
    assert _container(core, "other").state.running  # not selected


def test_a_node_that_stops_being_ready(
    core: client.CoreV1Api, sim: KubeSim, kubectl: Callable[..., Any]
) -> None:
    core.create_namespaced_pod(NS, pod_manifest("n"))
    node = core.read_namespaced_pod("n", NS).spec.node_name
    status, _ = _admin(sim, f"/_kubesim/nodes/{node}/ready", {"ready": False})
    assert status == 200
    got = core.read_node(node)
    ready = {c.type: c for c in got.status.conditions}["Ready"]
    assert ready.status == "False" and ready.reason == "KubeletNotReady"
    assert {(t.key, t.effect) for t in got.spec.taints or []} >= {
        ("node.kubernetes.io/not-ready", "NoSchedule"),
        ("node.kubernetes.io/not-ready", "NoExecute"),
    }
    assert "NotReady" in kubectl("get", "node", node).stdout
    pod_ready = {c.type: c for c in core.read_namespaced_pod("n", NS).status.conditions}
    assert pod_ready["Ready"].status == "False"
    assert _admin(sim, "/_kubesim/nodes/no-such-node/ready", {"ready": False})[0] == 404
    _admin(sim, f"/_kubesim/nodes/{node}/ready", {"ready": True})
    got = core.read_node(node)
    assert {c.type: c for c in got.status.conditions}["Ready"].status == "True"
    assert not [t for t in got.spec.taints or [] if t.key == "node.kubernetes.io/not-ready"]
    pod_ready = {c.type: c for c in core.read_namespaced_pod("n", NS).status.conditions}
    assert pod_ready["Ready"].status == "True"
