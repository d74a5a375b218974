"""Reading a cluster's pods (clusters.engine.readiness): ready only when KubeRay, the
head and every wanted worker are; until then, what the pods wait for in plain words."""

from __future__ import annotations

from typing import Any

from clusters.engine.readiness import is_ready, pod_ready, waiting_reason


def _pod(role: str, phase: str = "Running", ready: bool = True, uid: str = "") -> dict[str, Any]:
    return {
        "metadata": {"uid": uid or role, "labels": {"ray.io/node-type": role}},
        "status": {
            "phase": phase,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def test_a_pod_is_ready_only_running_with_its_ready_condition() -> None:
    assert pod_ready(_pod("head"))
    assert not pod_ready(_pod("head", ready=False))
    assert not pod_ready(_pod("head", phase="Pending"))
    assert not pod_ready({})


def test_ready_needs_kuberay_the_head_and_every_dev_worker(make_cluster: Any) -> None:
    cluster = make_cluster(workers=2)
    rc = {"status": {"state": "ready"}}
    pods = [_pod("head"), _pod("worker", uid="w1"), _pod("worker", uid="w2")]
    assert is_ready(cluster, rc, pods)
    assert not is_ready(cluster, rc, pods[:2])  # one worker short
    assert not is_ready(cluster, {"status": {"state": "suspended"}}, pods)
    assert not is_ready(cluster, rc, [_pod("head", ready=False), *pods[1:]])


def test_an_autoscaling_prod_cluster_is_ready_at_its_desired_workers(make_cluster: Any) -> None:
    cluster = make_cluster(kind="prod", workers=1, min_workers=0, max_workers=4)
    rc = {"status": {"state": "ready", "desiredWorkerReplicas": 0}}
    assert is_ready(cluster, rc, [_pod("head")])


def test_the_reason_names_what_the_pods_wait_for(make_cluster: Any) -> None:
    cluster = make_cluster()
    assert waiting_reason(cluster, [], {}) == "waiting for KubeRay to create the pods"
    pending = _pod("worker", phase="Pending", ready=False, uid="w1")
    event = {"message": " 0/4 nodes are available: 4 Insufficient nvidia.com/gpu. "}
    assert waiting_reason(cluster, [pending], {"w1": event}) == (
        "waiting for a node with a free h100: 0/4 nodes are available: 4 Insufficient "
        "nvidia.com/gpu."
    )
    assert waiting_reason(cluster, [pending], {}) == "1 pod waiting to be scheduled"
    starting = _pod("worker", ready=False)
    assert waiting_reason(cluster, [_pod("head"), starting], {}) == "1 pod starting"
    assert waiting_reason(cluster, [_pod("head")], {}) == (
        "waiting for KubeRay to report the cluster ready"
    )
