"""ResourceQuota admission (403 exceeded quota), status.used, LimitRange defaults, and the
operator's ReplicaFailure when quota refuses its pods."""

from __future__ import annotations

import json

import pytest
from kubernetes import client
from kubesim_helpers import H100, apply, get_rc, pod_manifest, raycluster


def make_ns(core: client.CoreV1Api, hard: dict[str, str]) -> None:
    core.create_namespace({"metadata": {"name": "tenant"}})
    core.create_namespaced_resource_quota(
        "tenant", {"metadata": {"name": "gangway-quota"}, "spec": {"hard": hard}}
    )


def test_pod_over_gpu_quota_is_forbidden(core: client.CoreV1Api) -> None:
    make_ns(core, {"requests.nvidia.com/gpu": "8", "pods": "10"})
    core.create_namespaced_pod(
        "tenant", pod_manifest("a", "tenant", gpu=8, product=H100, tolerate=True)
    )
    with pytest.raises(client.ApiException) as exc:
        core.create_namespaced_pod(
            "tenant", pod_manifest("x", "tenant", gpu=1, product=H100, tolerate=True)
        )
    assert exc.value.status == 403
    st = json.loads(exc.value.body)
    assert st["reason"] == "Forbidden"
    assert st["message"] == (
        'pods "x" is forbidden: exceeded quota: gangway-quota, requested: '
        "requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu=8, "
        "limited: requests.nvidia.com/gpu=8"
    )
    rq = core.read_namespaced_resource_quota("gangway-quota", "tenant")
    assert rq.status.hard == {"requests.nvidia.com/gpu": "8", "pods": "10"}
    assert rq.status.used == {"requests.nvidia.com/gpu": "8", "pods": "1"}
    core.delete_namespaced_pod("a", "tenant")
    rq = core.read_namespaced_resource_quota("gangway-quota", "tenant")
    assert rq.status.used == {"requests.nvidia.com/gpu": "0", "pods": "0"}
    core.create_namespaced_pod(
        "tenant", pod_manifest("x", "tenant", gpu=1, product=H100, tolerate=True)
    )


def test_cpu_memory_and_count_quotas(
    core: client.CoreV1Api, custom: client.CustomObjectsApi
) -> None:
    make_ns(
        core,
        {
            "requests.cpu": "3",
            "limits.memory": "4Gi",
            "count/rayclusters.ray.io": "1",
            "configmaps": "1",
            "services.nodeports": "0",
        },
    )
    core.create_namespaced_pod("tenant", pod_manifest("p", "tenant", cpu="2", memory="2Gi"))
    with pytest.raises(client.ApiException) as exc:
        core.create_namespaced_pod("tenant", pod_manifest("q", "tenant", cpu="1500m", memory="1Gi"))
    assert (
        "requested: requests.cpu=1500m, used: requests.cpu=2, limited: requests.cpu=3"
        in json.loads(exc.value.body)["message"]
    )
    with pytest.raises(client.ApiException) as exc:
        core.create_namespaced_pod(
            "tenant",
            {
                "metadata": {"name": "nores"},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]},
            },
        )
    assert "must specify limits.memory,requests.cpu" in json.loads(exc.value.body)["message"]
    core.create_namespaced_config_map("tenant", {"metadata": {"name": "one"}})
    with pytest.raises(client.ApiException) as exc:
        core.create_namespaced_config_map("tenant", {"metadata": {"name": "two"}})
    assert exc.value.status == 403
    with pytest.raises(client.ApiException) as exc:
        core.create_namespaced_service(
            "tenant",
            {"metadata": {"name": "np"}, "spec": {"type": "NodePort", "ports": [{"port": 80}]}},
        )
    assert "services.nodeports" in json.loads(exc.value.body)["message"]
    custom.create_namespaced_custom_object(
        "ray.io", "v1", "tenant", "rayclusters", raycluster("one", "tenant", workers=0)
    )
    with pytest.raises(client.ApiException) as exc:
        custom.create_namespaced_custom_object(
            "ray.io", "v1", "tenant", "rayclusters", raycluster("two", "tenant", workers=0)
        )
    assert exc.value.status == 403
    assert (
        'rayclusters.ray.io "two" is forbidden: exceeded quota'
        in json.loads(exc.value.body)["message"]
    )


def test_limitrange_defaults_requests_and_limits(core: client.CoreV1Api) -> None:
    core.create_namespace({"metadata": {"name": "lr"}})
    core.create_namespaced_limit_range(
        "lr",
        {
            "metadata": {"name": "defaults"},
            "spec": {
                "limits": [
                    {
                        "type": "Container",
                        "default": {"cpu": "1", "memory": "1Gi"},
                        "defaultRequest": {"cpu": "500m", "memory": "512Mi"},
                        "max": {"cpu": "4"},
                    }
                ]
            },
        },
    )
    core.create_namespaced_pod(
        "lr",
        {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}},
    )
    res = core.read_namespaced_pod("p", "lr").spec.containers[0].resources
    assert res.limits == {"cpu": "1", "memory": "1Gi"}
    assert res.requests == {"cpu": "500m", "memory": "512Mi"}
    with pytest.raises(client.ApiException) as exc:
        core.create_namespaced_pod("lr", pod_manifest("big", "lr", cpu="8"))
    assert exc.value.status == 403
    assert "maximum cpu usage per Container is 4" in json.loads(exc.value.body)["message"]


def test_operator_reports_replica_failure_and_recovers(
    core: client.CoreV1Api, custom: client.CustomObjectsApi
) -> None:
    make_ns(core, {"requests.nvidia.com/gpu": "1"})
    apply(custom, raycluster("rc", "tenant", workers=2))
    rc = get_rc(custom, "rc", "tenant")
    conds = {c["type"]: c for c in rc["status"]["conditions"]}
    assert conds["ReplicaFailure"]["status"] == "True"
    assert "exceeded quota" in conds["ReplicaFailure"]["message"]
    assert rc["status"].get("state") != "ready"
    ev = core.list_namespaced_event("tenant", field_selector="involvedObject.kind=RayCluster")
    assert ev.items[0].reason == "FailedCreateWorkerPod" and ev.items[0].type == "Warning"
    assert (
        len(core.list_namespaced_pod("tenant", label_selector="ray.io/node-type=worker").items) == 1
    )
    core.patch_namespaced_resource_quota(
        "gangway-quota", "tenant", {"spec": {"hard": {"requests.nvidia.com/gpu": "2"}}}
    )
    rc = get_rc(custom, "rc", "tenant")
    assert rc["status"]["state"] == "ready" and rc["status"]["readyWorkerReplicas"] == 2
    assert "ReplicaFailure" not in {c["type"] for c in rc["status"]["conditions"]}
