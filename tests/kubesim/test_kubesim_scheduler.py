"""Scheduling against taints, selectors, affinity and full nodes; FailedScheduling
wording; rescheduling when capacity frees."""

from __future__ import annotations

from kubernetes import client
from kubesim_helpers import H100, L4, pod_manifest

from kubesim import KubeSim


def events_for(core: client.CoreV1Api, pod: str) -> list[client.CoreV1Event]:
    return core.list_namespaced_event(
        "default", field_selector=f"involvedObject.name={pod},involvedObject.kind=Pod"
    ).items


def test_untolerated_taint_and_insufficient_gpu_wording(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod("default", pod_manifest("g", gpu=1))
    pod = core.read_namespaced_pod("g", "default")
    assert pod.status.phase == "Pending" and pod.spec.node_name is None
    cond = pod.status.conditions[0]
    assert (cond.type, cond.status, cond.reason) == ("PodScheduled", "False", "Unschedulable")
    expected = (
        "0/11 nodes are available: 2 Insufficient nvidia.com/gpu, 9 node(s) had "
        "untolerated taint {nvidia.com/gpu: }. preemption: 0/11 nodes are available: "
        "2 No preemption victims found for incoming pod, 9 Preemption is not helpful "
        "for scheduling."
    )
    assert cond.message == expected
    ev = events_for(core, "g")
    assert len(ev) == 1 and ev[0].reason == "FailedScheduling" and ev[0].type == "Warning"
    assert ev[0].message == expected and ev[0].source.component == "default-scheduler"


def test_selector_and_toleration_place_on_the_right_pool(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod(
        "default", pod_manifest("h", gpu=8, cpu="100", memory="1Ti", product=H100, tolerate=True)
    )
    core.create_namespaced_pod(
        "default", pod_manifest("l", gpu=1, cpu="8", memory="32Gi", product=L4, tolerate=True)
    )
    core.create_namespaced_pod("default", pod_manifest("c", cpu="4"))
    h = core.read_namespaced_pod("h", "default")
    assert h.spec.node_name.startswith("demo-h100-") and h.status.phase == "Running"
    assert h.status.pod_ip and h.status.container_statuses[0].ready
    assert core.read_namespaced_pod("l", "default").spec.node_name.startswith("demo-l4-")
    assert core.read_namespaced_pod("c", "default").spec.node_name.startswith("demo-cpu-")
    (scheduled,) = [e for e in events_for(core, "h") if e.reason == "Scheduled"]
    assert (
        h.spec.node_name in scheduled.message and scheduled.source.component == "default-scheduler"
    )


def test_full_nodes_leave_pods_pending_until_capacity_frees(core: client.CoreV1Api) -> None:
    for i in range(4):
        core.create_namespaced_pod(
            "default",
            pod_manifest(f"w{i}", gpu=8, cpu="100", memory="1Ti", product=H100, tolerate=True),
        )
    nodes = {core.read_namespaced_pod(f"w{i}", "default").spec.node_name for i in range(4)}
    assert len(nodes) == 4
    core.create_namespaced_pod("default", pod_manifest("late", gpu=1, product=H100, tolerate=True))
    late = core.read_namespaced_pod("late", "default")
    assert late.status.phase == "Pending"
    assert late.status.conditions[0].message.startswith(
        # The DRA driver's H100 node matches the selector but has no nvidia.com/gpu.
        "0/11 nodes are available: 5 Insufficient nvidia.com/gpu, 6 node(s)"
    )
    core.delete_namespaced_pod("w2", "default")
    late = core.read_namespaced_pod("late", "default")
    assert late.status.phase == "Running"
    assert late.spec.node_name == next(
        iter(
            nodes - {core.read_namespaced_pod(f"w{i}", "default").spec.node_name for i in (0, 1, 3)}
        )
    )


def test_node_affinity_and_unschedulable_nodes(core: client.CoreV1Api) -> None:
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {
                                "key": "kubernetes.io/hostname",
                                "operator": "In",
                                "values": ["demo-cpu-1"],
                            }
                        ]
                    }
                ]
            }
        }
    }
    core.patch_node("demo-cpu-1", {"spec": {"unschedulable": True}})
    core.create_namespaced_pod("default", pod_manifest("a", affinity=affinity))
    pod = core.read_namespaced_pod("a", "default")
    assert pod.status.phase == "Pending"
    assert "1 node(s) were unschedulable" in pod.status.conditions[0].message
    assert "node(s) didn't match Pod's node affinity/selector" in pod.status.conditions[0].message
    core.patch_node("demo-cpu-1", {"spec": {"unschedulable": False}})
    assert core.read_namespaced_pod("a", "default").spec.node_name == "demo-cpu-1"


def test_repeated_failures_bump_event_count(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod("default", pod_manifest("big", cpu="1000"))
    core.create_namespaced_pod("default", pod_manifest("small"))
    core.delete_namespaced_pod("small", "default")  # a deletion triggers a retry
    ev = events_for(core, "big")
    assert len(ev) == 1 and ev[0].count == 2
    assert "10 Insufficient cpu" in ev[0].message or "Insufficient cpu" in ev[0].message


def test_startup_delay_drives_running_by_ticker() -> None:
    import time

    sim = KubeSim(startup_delay=0.3).start()
    try:
        from kubernetes import client as kclient

        cfg = kclient.Configuration()
        cfg.host = sim.url
        core = kclient.CoreV1Api(kclient.ApiClient(cfg))
        core.create_namespaced_pod("default", pod_manifest("slow"))
        pod = core.read_namespaced_pod("slow", "default")
        assert pod.spec.node_name and pod.status.phase == "Pending"
        assert pod.status.container_statuses[0].state.waiting.reason == "ContainerCreating"
        deadline = time.monotonic() + 5
        while core.read_namespaced_pod("slow", "default").status.phase != "Running":
            assert time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        sim.stop()


def test_gpu_pods_bin_pack(core: client.CoreV1Api) -> None:
    for i in range(3):
        core.create_namespaced_pod(
            "default", pod_manifest(f"d{i}", gpu=1, product=H100, tolerate=True)
        )
    nodes = {core.read_namespaced_pod(f"d{i}", "default").spec.node_name for i in range(3)}
    assert len(nodes) == 1
