"""The emulated cluster autoscaler over HTTP with the official client: node groups that
grow for ProvisioningRequests and shrink when empty, the provisioning classes, bookings,
the CRD's validation, and kubectl."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException
from kubesim_helpers import GPU_TOLERATION, container, pod_manifest

from kubesim import KubeSim
from kubesim.clock import ManualClock

KUBECTL = shutil.which("kubectl", path=str(Path(sys.executable).parent)) or shutil.which("kubectl")
AS = ("autoscaling.x-k8s.io", "v1")
ATOMIC = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
CHECK = "check-capacity.autoscaling.x-k8s.io"
# One 8-GPU node that may grow to three, and one CPU node that may not.
FLEET: dict[str, Any] = {
    "name": "t",
    "autoscaler": {"scaleUpDelay": 30, "scaleDownUnneededTime": 60},
    "pools": [
        {
            "name": "h100",
            "count": 1,
            "maxCount": 3,
            "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
            "allocatable": {"cpu": "192", "memory": "1800Gi", "nvidia.com/gpu": "8", "pods": "110"},
            "taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}],
        },
        {
            "name": "cpu",
            "count": 1,
            "allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"},
        },
    ],
}


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def asim(clock: ManualClock) -> Iterator[KubeSim]:
    s = KubeSim(fleet=FLEET, clock=clock, booking_time=100).start()
    yield s
    s.stop()


@pytest.fixture
def api(asim: KubeSim) -> Iterator[client.ApiClient]:
    cfg = client.Configuration()
    cfg.host = asim.url
    a = client.ApiClient(cfg)
    yield a
    a.close()


@pytest.fixture
def v1(api: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api)


@pytest.fixture
def co(api: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api)


def wait_for(pred: Callable[[], Any], timeout: float = 5.0) -> Any:
    """Poll until ``pred`` is truthy (the ticker thread acts on the advanced clock)."""
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.05)


def template(v1: client.CoreV1Api, name: str, gpu: int = 8, ns: str = "default") -> None:
    """A PodTemplate of one GPU pod for the H100 pool."""
    v1.create_namespaced_pod_template(
        ns,
        {
            "metadata": {"name": name},
            "template": {
                "spec": {
                    "containers": [container(cpu="4", memory="16Gi", gpu=gpu)],
                    "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
                    "tolerations": [dict(GPU_TOLERATION)],
                }
            },
        },
    )


def provreq(
    co: client.CustomObjectsApi,
    name: str,
    tpl: str,
    count: int,
    cls: str = ATOMIC,
    params: dict[str, str] | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "autoscaling.x-k8s.io/v1",
        "kind": "ProvisioningRequest",
        "metadata": {"name": name},
        "spec": {
            "provisioningClassName": cls,
            "podSets": [{"podTemplateRef": {"name": tpl}, "count": count}],
        },
    }
    if params:
        body["spec"]["parameters"] = params
    result: dict[str, Any] = co.create_namespaced_custom_object(
        *AS, "default", "provisioningrequests", body
    )
    return result


def get_pr(co: client.CustomObjectsApi, name: str) -> dict[str, Any]:
    result: dict[str, Any] = co.get_namespaced_custom_object(
        *AS, "default", "provisioningrequests", name
    )
    return result


def cond(pr: dict[str, Any], ctype: str) -> dict[str, Any] | None:
    return next((c for c in pr.get("status", {}).get("conditions", []) if c["type"] == ctype), None)


def node_names(v1: client.CoreV1Api) -> list[str]:
    return sorted(n.metadata.name for n in v1.list_node().items)


def events(v1: client.CoreV1Api, name: str, ns: str = "default") -> list[Any]:
    return v1.list_namespaced_event(ns, field_selector=f"involvedObject.name={name}").items


def test_fits_now_is_provisioned_at_once(v1: client.CoreV1Api, co: client.CustomObjectsApi) -> None:
    template(v1, "one")
    provreq(co, "fits", "one", 1)
    pr = get_pr(co, "fits")
    accepted, provisioned = cond(pr, "Accepted"), cond(pr, "Provisioned")
    assert accepted and accepted["status"] == "True" and accepted["reason"] == "Accepted"
    assert provisioned and provisioned["status"] == "True"
    assert provisioned["reason"] == "CapacityIsFound"
    assert provisioned["message"] == "Capacity is found in the cluster"
    assert node_names(v1) == ["t-cpu-0", "t-h100-0"]


def test_atomic_scale_up_adds_nodes_after_the_delay(
    v1: client.CoreV1Api, co: client.CustomObjectsApi, clock: ManualClock
) -> None:
    template(v1, "whole")
    provreq(co, "grow", "whole", 3)  # 24 GPUs: the node has 8, two more nodes are needed
    pr = get_pr(co, "grow")
    provisioned = cond(pr, "Provisioned")
    # Best effort: CA admits as soon as the scale-up is asked, not when the nodes are up.
    assert provisioned and provisioned["status"] == "True"
    assert provisioned["reason"] == "CapacityIsProvisioned"
    assert [e.message for e in events(v1, "grow") if e.reason == "TriggeredScaleUp"] == [
        "pod triggered scale-up: [{h100 1->3 (max: 3)}]"
    ]
    assert node_names(v1) == ["t-cpu-0", "t-h100-0"]  # still booting
    clock.advance(29)
    time.sleep(0.2)
    assert node_names(v1) == ["t-cpu-0", "t-h100-0"]
    clock.advance(1)
    wait_for(lambda: len(node_names(v1)) == 4)
    assert node_names(v1) == ["t-cpu-0", "t-h100-0", "t-h100-1", "t-h100-2"]
    added = v1.read_node("t-h100-2")
    original = v1.read_node("t-h100-0")
    assert added.metadata.labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert added.metadata.labels["kubernetes.io/hostname"] == "t-h100-2"
    assert added.status.allocatable == original.status.allocatable
    assert [t.key for t in added.spec.taints] == ["nvidia.com/gpu"]
    ready = next(c for c in added.status.conditions if c.type == "Ready")
    assert ready.status == "True"
    # The consuming pods then schedule onto the new nodes.
    for i in range(3):
        body = pod_manifest(f"w{i}", gpu=8, tolerate=True, product="NVIDIA-H100-80GB-HBM3")
        body["metadata"]["annotations"] = {
            "autoscaling.x-k8s.io/consume-provisioning-request": "grow"
        }
        v1.create_namespaced_pod("default", body)
    assert sorted(v1.read_namespaced_pod(f"w{i}", "default").spec.node_name for i in range(3)) == [
        "t-h100-0",
        "t-h100-1",
        "t-h100-2",
    ]


def test_atomic_fails_without_partial_scale_up(
    v1: client.CoreV1Api, co: client.CustomObjectsApi, clock: ManualClock
) -> None:
    template(v1, "whole")
    provreq(co, "big", "whole", 4)  # 32 GPUs: even three nodes hold only 24
    pr = get_pr(co, "big")
    provisioned = cond(pr, "Provisioned")
    assert provisioned and provisioned["status"] == "False"
    assert provisioned["reason"] == "CapacityIsNotFound"
    assert provisioned["message"] == "Capacity is not found, CA will try to find it later."
    assert cond(pr, "Failed") is None  # CA keeps trying
    msgs = [e.message for e in events(v1, "big") if e.reason == "NotTriggerScaleUp"]
    assert msgs == ["pod didn't trigger scale-up: 1 max node group size reached"]
    clock.advance(60)
    time.sleep(0.3)
    assert node_names(v1) == ["t-cpu-0", "t-h100-0"]  # atomic: nothing was added
    # After 7 days without capacity CA gives up.
    clock.advance(7 * 24 * 3600)
    failed = wait_for(lambda: cond(get_pr(co, "big"), "Failed"))
    assert failed["status"] == "True"
    assert (failed["reason"], failed["message"]) == ("Expired", "ProvisioningRequest is expired")


def test_a_pod_set_no_group_can_hold_is_not_found(
    v1: client.CoreV1Api, co: client.CustomObjectsApi
) -> None:
    template(v1, "huge", gpu=16)  # no node of any group has 16 GPUs
    provreq(co, "huge", "huge", 1)
    pr = get_pr(co, "huge")
    assert cond(pr, "Provisioned")["reason"] == "CapacityIsNotFound"  # type: ignore[index]
    msgs = [e.message for e in events(v1, "huge") if e.reason == "NotTriggerScaleUp"]
    assert msgs == ["pod didn't trigger scale-up: 1 Insufficient nvidia.com/gpu"]


def test_booking_expires_and_empty_added_nodes_are_scaled_down(
    v1: client.CoreV1Api, co: client.CustomObjectsApi, clock: ManualClock
) -> None:
    template(v1, "whole")
    provreq(co, "grow", "whole", 2)
    clock.advance(30)
    wait_for(lambda: "t-h100-1" in node_names(v1))
    # Booked (100 s here): the empty added node stays past the unneeded time (60 s).
    clock.advance(65)
    time.sleep(0.3)
    assert "t-h100-1" in node_names(v1)
    assert cond(get_pr(co, "grow"), "BookingExpired") is None
    clock.advance(10)  # 105 s after the Provisioned transition
    expired = wait_for(lambda: cond(get_pr(co, "grow"), "BookingExpired"))
    assert expired["status"] == "True"
    assert expired["reason"] == "CapacityReservationTimeExpired"
    assert expired["message"] == "Capacity reservation time is expired"
    time.sleep(0.2)
    clock.advance(59)
    time.sleep(0.3)
    assert "t-h100-1" in node_names(v1)  # unneeded for 59 s only
    clock.advance(2)
    wait_for(lambda: "t-h100-1" not in node_names(v1))
    assert node_names(v1) == ["t-cpu-0", "t-h100-0"]  # the pool's count is never removed
    evs = {e.reason: e for e in events(v1, "t-h100-1")}
    assert evs["ScaleDown"].message == "marked the node as toBeDeleted/unschedulable"
    assert evs["ScaleDownEmpty"].message == 'Scale-down: removing empty node "t-h100-1"'
    assert evs["ScaleDown"].source.component == "cluster-autoscaler"


def test_an_added_node_with_pods_is_kept(
    v1: client.CoreV1Api, co: client.CustomObjectsApi, clock: ManualClock
) -> None:
    template(v1, "whole")
    provreq(co, "grow", "whole", 2)
    clock.advance(30)
    wait_for(lambda: "t-h100-1" in node_names(v1))
    for i in range(2):
        body = pod_manifest(f"w{i}", gpu=8, tolerate=True)
        body["metadata"]["annotations"] = {
            "cluster-autoscaler.kubernetes.io/consume-provisioning-request": "grow"
        }
        v1.create_namespaced_pod("default", body)
    assert v1.read_namespaced_pod("w1", "default").spec.node_name
    clock.advance(500)
    time.sleep(0.3)
    assert "t-h100-1" in node_names(v1)
    v1.delete_namespaced_pod("w0", "default")
    v1.delete_namespaced_pod("w1", "default")
    time.sleep(0.2)
    clock.advance(61)
    wait_for(lambda: "t-h100-1" not in node_names(v1))


def test_booked_capacity_is_not_offered_again_until_consumed_or_deleted(
    v1: client.CoreV1Api, co: client.CustomObjectsApi
) -> None:
    template(v1, "half", gpu=4)
    provreq(co, "a", "half", 1, cls=CHECK)  # books 4 of the node's 8 GPUs
    assert cond(get_pr(co, "a"), "Provisioned")["status"] == "True"  # type: ignore[index]
    # A real pod not consuming the booking takes the other 4: nothing is left for b.
    v1.create_namespaced_pod("default", pod_manifest("other", gpu=4, tolerate=True))
    provreq(co, "b", "half", 1, cls=CHECK)
    b = cond(get_pr(co, "b"), "Provisioned")
    assert b and b["status"] == "False" and b["reason"] == "CapacityIsNotFound"
    # The booked pod arrives (it consumes a's booking): still no room for b ...
    consumer = pod_manifest("consumer", gpu=4, tolerate=True)
    consumer["metadata"]["annotations"] = {"autoscaling.x-k8s.io/consume-provisioning-request": "a"}
    v1.create_namespaced_pod("default", consumer)
    assert cond(get_pr(co, "b"), "Provisioned")["status"] == "False"  # type: ignore[index]
    # ... until the other pod goes: its 4 GPUs are free and not booked any more.
    v1.delete_namespaced_pod("other", "default")
    assert cond(get_pr(co, "b"), "Provisioned")["status"] == "True"  # type: ignore[index]


def test_deleting_a_request_releases_its_booking(
    v1: client.CoreV1Api, co: client.CustomObjectsApi
) -> None:
    template(v1, "whole")
    provreq(co, "a", "whole", 1, cls=CHECK)
    provreq(co, "b", "whole", 1, cls=CHECK)
    assert cond(get_pr(co, "b"), "Provisioned")["status"] == "False"  # type: ignore[index]
    co.delete_namespaced_custom_object(*AS, "default", "provisioningrequests", "a")
    assert cond(get_pr(co, "b"), "Provisioned")["status"] == "True"  # type: ignore[index]


def test_check_capacity_never_scales_up(
    v1: client.CoreV1Api, co: client.CustomObjectsApi, clock: ManualClock
) -> None:
    template(v1, "whole")
    provreq(co, "check", "whole", 2, cls=CHECK)
    c = cond(get_pr(co, "check"), "Provisioned")
    assert c and (c["status"], c["reason"]) == ("False", "CapacityIsNotFound")
    clock.advance(60)
    time.sleep(0.3)
    assert node_names(v1) == ["t-cpu-0", "t-h100-0"]
    provreq(co, "once", "whole", 2, cls=CHECK, params={"noRetry": "true"})
    failed = cond(get_pr(co, "once"), "Failed")
    assert failed and failed["status"] == "True"
    assert failed["message"] == "CA could not find requested capacity"


def test_unknown_class_is_left_alone(v1: client.CoreV1Api, co: client.CustomObjectsApi) -> None:
    template(v1, "whole")
    provreq(co, "other", "whole", 1, cls="queued-provisioning.gke.io")
    assert get_pr(co, "other").get("status", {}).get("conditions") in (None, [])


def test_missing_pod_template_fails(co: client.CustomObjectsApi) -> None:
    provreq(co, "orphan", "nope", 1)
    failed = cond(get_pr(co, "orphan"), "Failed")
    assert failed and failed["reason"] == "FailedToCreatePods"
    assert 'podtemplates "nope" not found' in failed["message"]


@pytest.mark.parametrize(
    ("pod_sets", "field"),
    [
        ([], "spec.podSets"),
        ([{"podTemplateRef": {"name": "t"}, "count": 1}] * 33, "spec.podSets"),
        ([{"podTemplateRef": {"name": "t"}, "count": 0}], "spec.podSets[0].count"),
        ([{"count": 1}], "spec.podSets[0].podTemplateRef"),
        (
            [{"podTemplateRef": {"name": "Bad_Name"}, "count": 1}],
            "spec.podSets[0].podTemplateRef.name",
        ),
    ],
)
def test_bad_pod_sets_are_invalid(
    co: client.CustomObjectsApi, pod_sets: list[dict[str, Any]], field: str
) -> None:
    body = {
        "apiVersion": "autoscaling.x-k8s.io/v1",
        "kind": "ProvisioningRequest",
        "metadata": {"name": "bad"},
        "spec": {"provisioningClassName": ATOMIC, "podSets": pod_sets},
    }
    with pytest.raises(ApiException) as err:
        co.create_namespaced_custom_object(*AS, "default", "provisioningrequests", body)
    assert err.value.status == 422
    assert field in str(err.value.body)


def test_spec_is_immutable(v1: client.CoreV1Api, co: client.CustomObjectsApi) -> None:
    template(v1, "whole")
    provreq(co, "fixed", "whole", 1)
    with pytest.raises(ApiException) as err:
        co.patch_namespaced_custom_object(
            *AS,
            "default",
            "provisioningrequests",
            "fixed",
            {"spec": {"provisioningClassName": CHECK}},
        )
    assert err.value.status == 422
    assert "spec.provisioningClassName" in str(err.value.body)
    assert "Value is immutable" in str(err.value.body)


def test_served_with_discovery_and_kubectl(
    asim: KubeSim, v1: client.CoreV1Api, co: client.CustomObjectsApi, tmp_path: Path
) -> None:
    template(v1, "whole")
    provreq(co, "seen", "whole", 1)
    assert v1.list_namespaced_pod_template("default").items[0].metadata.name == "whole"
    # v1beta1 serves the same object.
    old = co.get_namespaced_custom_object(
        "autoscaling.x-k8s.io", "v1beta1", "default", "provisioningrequests", "seen"
    )
    assert old["apiVersion"] == "autoscaling.x-k8s.io/v1beta1"
    if KUBECTL is None:
        pytest.skip("kubectl is not installed")
    cfg = asim.write_kubeconfig(str(tmp_path / "kc"))
    env = dict(os.environ, KUBECONFIG=cfg, HOME=str(tmp_path))
    out = subprocess.run(
        [str(KUBECTL), "get", "provreq", "-o", "name"], env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "provisioningrequest.autoscaling.x-k8s.io/seen"
    out = subprocess.run(
        [str(KUBECTL), "get", "podtemplates"], env=env, capture_output=True, text=True
    )
    assert out.returncode == 0 and "whole" in out.stdout, out.stderr


def test_pools_without_max_do_not_grow(v1: client.CoreV1Api, co: client.CustomObjectsApi) -> None:
    v1.create_namespaced_pod_template(
        "default",
        {"metadata": {"name": "cpu"}, "template": {"spec": {"containers": [container(cpu="30")]}}},
    )
    provreq(co, "cpus", "cpu", 2)  # one 30-CPU pod fits on the CPU node; the pool has no max
    c = cond(get_pr(co, "cpus"), "Provisioned")
    assert c and c["status"] == "False"
    assert node_names(v1) == ["t-cpu-0", "t-h100-0"]


def test_unschedulable_pods_grow_a_group_and_empty_nodes_go(
    v1: client.CoreV1Api, clock: ManualClock
) -> None:
    v1.create_namespaced_pod("default", pod_manifest("first", gpu=8, tolerate=True))
    v1.create_namespaced_pod("default", pod_manifest("second", gpu=8, tolerate=True))
    assert not v1.read_namespaced_pod("second", "default").spec.node_name
    msgs = [e.message for e in events(v1, "second") if e.reason == "TriggeredScaleUp"]
    assert msgs == ["pod triggered scale-up: [{h100 1->2 (max: 3)}]"]
    clock.advance(30)
    wait_for(lambda: v1.read_namespaced_pod("second", "default").spec.node_name == "t-h100-1")
    # A pod no group can ever hold says why.
    v1.create_namespaced_pod("default", pod_manifest("huge", gpu=16, tolerate=True))
    msgs = [e.message for e in events(v1, "huge") if e.reason == "NotTriggerScaleUp"]
    assert msgs == ["pod didn't trigger scale-up: 1 Insufficient nvidia.com/gpu"]
    v1.delete_namespaced_pod("second", "default")
    time.sleep(0.2)
    clock.advance(61)
    wait_for(lambda: "t-h100-1" not in node_names(v1))
    assert v1.read_namespaced_pod("first", "default").spec.node_name == "t-h100-0"


def test_scale_up_stops_at_the_max(v1: client.CoreV1Api, clock: ManualClock) -> None:
    for i in range(4):
        v1.create_namespaced_pod("default", pod_manifest(f"p{i}", gpu=8, tolerate=True))
    triggered = [
        e.message for i in range(4) for e in events(v1, f"p{i}") if e.reason == "TriggeredScaleUp"
    ]
    # Each pod arrives in its own request, so each grows the group by one.
    assert triggered == [
        "pod triggered scale-up: [{h100 1->2 (max: 3)}]",
        "pod triggered scale-up: [{h100 2->3 (max: 3)}]",
    ]
    not_triggered = [
        e.message for i in range(4) for e in events(v1, f"p{i}") if e.reason == "NotTriggerScaleUp"
    ]
    assert not_triggered == ["pod didn't trigger scale-up: 1 max node group size reached"]
    clock.advance(30)
    wait_for(lambda: len(node_names(v1)) == 4)
    bound = [v1.read_namespaced_pod(f"p{i}", "default").spec.node_name for i in range(4)]
    assert sum(1 for b in bound if b) == 3


def test_autoscaling_fleet_starts_like_the_demo_and_knobs_parse() -> None:
    from kubesim.__main__ import parse_args
    from kubesim.fleet import FLEET_DIR

    sim = KubeSim(fleet=os.path.join(FLEET_DIR, "autoscaling.yaml"))  # not started
    assert sim.cluster.store.count("nodes") == 10  # as demo.yaml less its MIG node
    groups = sim.cluster.autoscaler.groups
    assert {g: (groups[g].min_size, groups[g].max_size) for g in groups} == {
        "h100": (4, 8),
        "l4": (4, 8),
    }
    assert sim.cluster.autoscaler.scale_up_delay == 30.0
    args = parse_args(
        [
            "--scale-up-delay",
            "5",
            "--scale-down-unneeded-time",
            "120",
            "--provisioning-request-booking-time",
            "60",
        ]
    )
    assert (
        args.scale_up_delay,
        args.scale_down_unneeded_time,
        args.provisioning_request_booking_time,
    ) == (5.0, 120.0, 60.0)
    with pytest.raises(ValueError, match="maxCount is below count"):
        KubeSim(fleet={"name": "x", "pools": [{**FLEET["pools"][0], "maxCount": 0}]})


def test_added_nodes_survive_a_snapshot_and_still_scale_down(
    asim: KubeSim,
    v1: client.CoreV1Api,
    co: client.CustomObjectsApi,
    clock: ManualClock,
    tmp_path: Path,
) -> None:
    template(v1, "whole")
    provreq(co, "grow", "whole", 2)
    clock.advance(30)
    wait_for(lambda: "t-h100-1" in node_names(v1))
    path = str(tmp_path / "snap.json")
    asim.save_snapshot(path)
    # What a restart with --snapshot does: a fresh simulator loads the saved state (it is
    # driven by hand here: tick() is what its ticker thread would call).
    again = KubeSim(fleet=FLEET, clock=clock, booking_time=100, snapshot_path=path)
    cluster = again.cluster
    node = cluster.store.get("nodes", "", "t-h100-1")
    assert node is not None
    assert node["metadata"]["annotations"]["kubesim.io/provisioning-request"] == "default/grow"
    clock.advance(75)  # the booking (100 s) is over
    cluster.tick()
    pr = cluster.store.get("provisioningrequests.autoscaling.x-k8s.io", "default", "grow")
    assert cond(pr, "BookingExpired")["status"] == "True"  # type: ignore[arg-type,index]
    assert cluster.store.get("nodes", "", "t-h100-1") is not None
    clock.advance(61)
    cluster.tick()
    assert cluster.store.get("nodes", "", "t-h100-1") is None
    assert cluster.store.get("nodes", "", "t-h100-0") is not None
