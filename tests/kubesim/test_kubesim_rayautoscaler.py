"""KubeRay's in-tree autoscaling in kubesim, from outside: KubeRay v1.7.0's own autoscaler
samples applied with kubectl get the ``autoscaler`` sidecar and its RBAC objects, and the
simulated Ray autoscaler scales worker groups to the demand of the jobs on the head (Ray's
job API through the service proxy, a RayJob, an interactive driver), within min/max, with
``upscalingMode`` and ``idleTimeoutSeconds``, writing ``replicas``/``workersToDelete``."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess
from typing import Any

import pytest
import requests
from kubernetes import client
from kubesim_helpers import get_rc, raycluster, rayjob
from manual_clock import advance, clock, sim

from kubesim import KubeSim
from kubesim.clock import ManualClock

__all__ = ["clock", "sim"]

CORPUS = Path(__file__).parent / "corpus" / "kuberay"
SAMPLE = CORPUS / "ray-cluster.autoscaler.yaml"
SAMPLE_V2 = CORPUS / "ray-cluster.autoscaler-v2.yaml"
RC = "raycluster-autoscaler"
START = (
    "ray kuberay-autoscaler --cluster-name $(RAY_CLUSTER_NAME) "
    "--cluster-namespace $(RAY_CLUSTER_NAMESPACE)"
)
Kubectl = Callable[..., CompletedProcess[str]]


def kget(kubectl: Kubectl, *args: str) -> Any:
    """``kubectl get ... -o json``, parsed."""
    return json.loads(kubectl("get", *args, "-o", "json").stdout)


def workers(core: client.CoreV1Api, cluster: str = RC) -> list[str]:
    """Names of the cluster's worker pods."""
    pods = core.list_namespaced_pod(
        "default", label_selector=f"ray.io/cluster={cluster},ray.io/node-type=worker"
    ).items
    return sorted(p.metadata.name for p in pods)


def running_workers(core: client.CoreV1Api, cluster: str = RC) -> int:
    """How many of the cluster's worker pods are Running."""
    pods = core.list_namespaced_pod(
        "default", label_selector=f"ray.io/cluster={cluster},ray.io/node-type=worker"
    ).items
    return sum(1 for p in pods if p.status.phase == "Running")


def group(custom: client.CustomObjectsApi, cluster: str = RC) -> dict[str, Any]:
    """The cluster's first worker group spec."""
    found: dict[str, Any] = get_rc(custom, cluster)["spec"]["workerGroupSpecs"][0]
    return found


def submit(sim: KubeSim, job_id: str, bundles: list[dict[str, Any]] | str, seconds: int) -> None:
    """``POST /api/jobs/`` on the sample's head, through the API server's service proxy,
    with the demand knob in the job's metadata."""
    url = f"{sim.url}/api/v1/namespaces/default/services/{RC}-head-svc:dashboard/proxy/api/jobs/"
    body = {
        "entrypoint": "python tune.py",
        "submission_id": job_id,
        "metadata": {
            "kubesim.io/job-demand": bundles if isinstance(bundles, str) else json.dumps(bundles),
            "kubesim.io/job-run-seconds": str(seconds),
        },
    }
    r = requests.post(url, json=body, timeout=10)
    assert r.status_code == 200, r.text


def events(core: client.CoreV1Api, reason: str) -> list[str]:
    """Messages of the RayCluster events with ``reason``."""
    return [
        e.message
        for e in core.list_namespaced_event("default").items
        if e.reason == reason and e.involved_object.kind == "RayCluster"
    ]


def test_the_sample_gets_the_autoscaler_sidecar_and_its_rbac(kubectl: Kubectl) -> None:
    kubectl("apply", "-f", str(SAMPLE))
    pods = kget(kubectl, "pods", "-l", f"ray.io/cluster={RC},ray.io/node-type=head")["items"]
    assert len(pods) == 1
    spec = pods[0]["spec"]
    ray, side = spec["containers"]
    assert side["name"] == "autoscaler" and side["image"] == ray["image"] == "rayproject/ray:2.52.0"
    assert side["imagePullPolicy"] == "IfNotPresent"
    assert side["command"] == ["/bin/bash", "-c", "--"] and side["args"] == [START]
    env = {e["name"]: e for e in side["env"]}
    assert list(env) == [
        "RAY_CLUSTER_NAME",
        "RAY_CLUSTER_NAMESPACE",
        "RAY_HEAD_POD_NAME",
        "KUBERAY_CRD_VER",
        "KUBERAY_GEN_AUTOSCALER_START_CMD",
    ]
    assert (
        env["RAY_CLUSTER_NAME"]["valueFrom"]["fieldRef"]["fieldPath"]
        == "metadata.labels['ray.io/cluster']"
    )
    assert env["RAY_HEAD_POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert env["KUBERAY_CRD_VER"]["value"] == "v1"
    assert env["KUBERAY_GEN_AUTOSCALER_START_CMD"]["value"] == START
    assert side["resources"] == {
        "limits": {"cpu": "500m", "memory": "512Mi"},
        "requests": {"cpu": "500m", "memory": "512Mi"},
    }
    assert side["securityContext"] == {}
    # The head runs as the cluster's service account and shares its log directory.
    assert spec["serviceAccountName"] == RC
    assert {"name": "ray-logs", "emptyDir": {}} in spec["volumes"]
    for c in (ray, side):
        assert {"mountPath": "/tmp/ray", "name": "ray-logs"} in c["volumeMounts"]
    assert "RAY_enable_autoscaler_v2" not in {e["name"] for e in ray.get("env", [])}

    owner = {"kind": "RayCluster", "name": RC}
    sa = kget(kubectl, "serviceaccount", RC)
    role = kget(kubectl, "role", RC)
    binding = kget(kubectl, "rolebinding", RC)
    for obj in (sa, role, binding):
        ref = obj["metadata"]["ownerReferences"][0]
        assert {k: ref[k] for k in owner} == owner and ref["controller"] is True
        assert obj["metadata"]["labels"] == {
            "ray.io/cluster": RC,
            "app.kubernetes.io/name": "kuberay",
            "app.kubernetes.io/created-by": "kuberay-operator",
        }
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "patch"]},
        {"apiGroups": [""], "resources": ["pods/resize"], "verbs": ["patch"]},
        {"apiGroups": ["ray.io"], "resources": ["rayclusters"], "verbs": ["get", "patch"]},
    ]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": RC, "namespace": "default"}]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": RC,
    }
    # The operator's events, and the sidecar is not started by a cluster without it.
    reasons = {e["reason"] for e in kget(kubectl, "events")["items"]}
    assert {"CreatedServiceAccount", "CreatedRole", "CreatedRoleBinding"} <= reasons


def test_no_sidecar_without_in_tree_autoscaling(
    core: client.CoreV1Api, custom: client.CustomObjectsApi
) -> None:
    custom.create_namespaced_custom_object(
        "ray.io", "v1", "default", "rayclusters", raycluster("plain", workers=1)
    )
    head = core.list_namespaced_pod(
        "default", label_selector="ray.io/cluster=plain,ray.io/node-type=head"
    ).items[0]
    assert [c.name for c in head.spec.containers] == ["ray-head"]
    assert head.spec.service_account_name in (None, "default")
    assert not core.list_namespaced_service_account("default").items
    assert events(core, "CreatedServiceAccount") == []


def test_the_v2_sample_turns_autoscaler_v2_on_and_honours_a_groups_idle_timeout(
    kubectl: Kubectl,
    core: client.CoreV1Api,
    custom: client.CustomObjectsApi,
    sim: KubeSim,
    clock: ManualClock,
) -> None:
    kubectl("apply", "-f", str(SAMPLE_V2))
    head = kget(kubectl, "pods", "-l", f"ray.io/cluster={RC},ray.io/node-type=head")["items"][0]
    ray = head["spec"]["containers"][0]
    assert {"name": "RAY_enable_autoscaler_v2", "value": "true"} in ray["env"]
    assert head["spec"]["restartPolicy"] == "Never"
    # Under v2 a group may have its own idle timeout (KubeRay refuses it under v1).
    kubectl(
        "patch", "raycluster", RC, "--type=json", "-p",
        json.dumps([{"op": "add", "path": "/spec/workerGroupSpecs/0/idleTimeoutSeconds",
                     "value": 10}]),
    )  # fmt: skip
    submit(sim, "short", [{"CPU": 1}], seconds=20)
    advance(sim, clock, 5)
    (name,) = workers(core)
    assert core.read_namespaced_pod(name, "default").spec.restart_policy == "Never"
    advance(sim, clock, 20)  # the job ended at 21 s; 25 s now
    assert workers(core) == [name]
    advance(sim, clock, 5)
    advance(sim, clock, 5)  # 35 s: idle 14 s, past the group's 10 (the cluster's is 60)
    assert workers(core) == [] and group(custom)["scaleStrategy"]["workersToDelete"] == [name]


def test_demand_scales_up_within_max_then_idle_workers_go_through_workers_to_delete(
    kubectl: Kubectl,
    core: client.CoreV1Api,
    custom: client.CustomObjectsApi,
    sim: KubeSim,
    clock: ManualClock,
) -> None:
    kubectl("apply", "-f", str(SAMPLE))
    assert workers(core) == [] and group(custom)["replicas"] == 0
    # Four 1-CPU tasks: the head has num-cpus 0, so four 1-CPU workers.
    submit(sim, "four", [{"CPU": 1, "count": 4}], seconds=100)
    advance(sim, clock, 5)  # PENDING for a second, then RUNNING; the next pass sees it
    assert group(custom)["replicas"] == 4
    assert len(workers(core)) == 4 and running_workers(core) == 4
    first = workers(core)
    # Thirty more, for 50 s: capped at maxReplicas 10.
    submit(sim, "many", [{"CPU": 1, "count": 30}], seconds=50)
    advance(sim, clock, 5)
    advance(sim, clock, 5)
    assert group(custom)["replicas"] == 10 and len(workers(core)) == 10
    assert kget(kubectl, "raycluster", RC)["status"]["desiredWorkerReplicas"] == 10
    later = sorted(set(workers(core)) - set(first))

    # "many" ends 56 s after the apply: its six workers are idle from then (the first
    # four still run "four" until 101 s); each goes 60 s after it was last used.
    advance(sim, clock, 100)  # 115 s
    assert group(custom)["replicas"] == 10 and len(workers(core)) == 10
    advance(sim, clock, 5)  # 120 s
    spec = group(custom)
    assert spec["replicas"] == 4
    assert sorted(spec["scaleStrategy"]["workersToDelete"]) == later
    assert workers(core) == first
    assert events(core, "DeletedWorkerPod")  # KubeRay deleted the named pods
    advance(sim, clock, 5)  # 125 s: cleared once KubeRay has deleted them
    assert group(custom)["scaleStrategy"] == {"workersToDelete": []}
    advance(sim, clock, 35)  # 160 s: "four"'s workers idle 59 s
    assert workers(core) == first
    advance(sim, clock, 5)  # 165 s: down to minReplicas 0
    spec = group(custom)
    assert spec["replicas"] == 0 and sorted(spec["scaleStrategy"]["workersToDelete"]) == first
    assert workers(core) == []
    assert kget(kubectl, "raycluster", RC)["status"]["desiredWorkerReplicas"] == 0


@pytest.mark.parametrize(("mode", "after_one_pass"), [("Conservative", 5), ("Default", 10)])
def test_upscaling_mode_caps_the_pending_pods(
    mode: str,
    after_one_pass: int,
    kubectl: Kubectl,
    core: client.CoreV1Api,
    custom: client.CustomObjectsApi,
    sim: KubeSim,
    clock: ManualClock,
) -> None:
    kubectl("apply", "-f", str(SAMPLE))
    kubectl(
        "patch", "raycluster", RC, "--type=merge", "-p",
        json.dumps({"spec": {"autoscalerOptions": {"upscalingMode": mode}}}),
    )  # fmt: skip
    submit(sim, "ten", [{"CPU": 1, "count": 10}], seconds=600)
    advance(sim, clock, 5)
    # Conservative: at most max(5, running) pending at once (none running yet: 5).
    assert group(custom)["replicas"] == after_one_pass
    advance(sim, clock, 5)
    assert group(custom)["replicas"] == 10 and running_workers(core) == 10


def test_demand_no_group_can_hold_or_that_does_not_parse_launches_nothing(
    kubectl: Kubectl, custom: client.CustomObjectsApi, sim: KubeSim, clock: ManualClock
) -> None:
    kubectl("apply", "-f", str(SAMPLE))
    submit(sim, "typo", "[{CPU: 1}]", seconds=600)
    submit(sim, "huge", [{"CPU": 2}], seconds=600)  # the sample's workers have 1 CPU
    submit(sim, "gpu", [{"GPU": 1}], seconds=600)  # and no GPU
    advance(sim, clock, 5)
    advance(sim, clock, 5)
    assert group(custom)["replicas"] == 0
    submit(sim, "fits", [{"CPU": 1, "memory": "512Mi", "count": 2}], seconds=600)
    advance(sim, clock, 5)
    assert group(custom)["replicas"] == 2


def autoscaling_cluster(name: str, low: int, high: int, idle: int) -> dict[str, Any]:
    """The helpers' GPU cluster with in-tree autoscaling between ``low`` and ``high``."""
    body = raycluster(name, workers=low)
    body["spec"]["enableInTreeAutoscaling"] = True
    body["spec"]["autoscalerOptions"] = {"idleTimeoutSeconds": idle}
    g = body["spec"]["workerGroupSpecs"][0]
    g["minReplicas"], g["maxReplicas"] = low, high
    return body


def test_a_rayjob_with_entrypoint_gpus_gets_a_gpu_worker_and_min_replicas_stay(
    core: client.CoreV1Api, custom: client.CustomObjectsApi, sim: KubeSim, clock: ManualClock
) -> None:
    rc_spec = autoscaling_cluster("x", low=1, high=3, idle=30)["spec"]
    body = rayjob(
        "train",
        annotations={
            "kubesim.io/job-run-seconds": "60",
            "kubesim.io/job-demand": '[{"GPU": 1, "CPU": 8}]',
        },
        entrypointNumGpus=1,
    )
    body["spec"]["rayClusterSpec"] = rc_spec
    custom.create_namespaced_custom_object("ray.io", "v1", "default", "rayjobs", body)
    cluster = custom.get_namespaced_custom_object("ray.io", "v1", "default", "rayjobs", "train")[
        "status"
    ]["rayClusterName"]
    assert len(workers(core, cluster)) == 1  # minReplicas
    advance(sim, clock, 5)  # the submitter submitted; the driver runs
    # The driver's GPU takes the one worker; its task needs another GPU worker.
    assert group(custom, cluster)["replicas"] == 2
    assert running_workers(core, cluster) == 2
    advance(sim, clock, 60)  # the job ends
    for _ in range(8):
        advance(sim, clock, 5)
    spec = group(custom, cluster)
    assert spec["replicas"] == 1 and len(workers(core, cluster)) == 1


def test_interactive_driver_demand_and_a_named_service_account(
    core: client.CoreV1Api, custom: client.CustomObjectsApi, sim: KubeSim, clock: ManualClock
) -> None:
    body = autoscaling_cluster("dev", low=0, high=4, idle=60)
    body["spec"]["headGroupSpec"]["template"]["spec"]["serviceAccountName"] = "dev-ray"
    body["metadata"]["annotations"] = {
        "kubesim.io/ray-driver": "active",
        "kubesim.io/ray-driver-demand": '[{"GPU": 1, "count": 3}]',
    }
    custom.create_namespaced_custom_object("ray.io", "v1", "default", "rayclusters", body)
    # KubeRay waits for a service account the user named but did not create.
    assert core.list_namespaced_pod("default", label_selector="ray.io/cluster=dev").items == []
    assert any(
        "ServiceAccount dev-ray is not found" in m
        for m in events(core, "AutoscalerServiceAccountNotFound")
    )
    core.create_namespaced_service_account("default", {"metadata": {"name": "dev-ray"}})
    head = core.list_namespaced_pod(
        "default", label_selector="ray.io/cluster=dev,ray.io/node-type=head"
    ).items[0]
    assert head.spec.service_account_name == "dev-ray"
    assert group(custom, "dev")["replicas"] == 3  # the first pass runs as the head starts
    custom.patch_namespaced_custom_object(
        "ray.io", "v1", "default", "rayclusters", "dev",
        {"metadata": {"annotations": {"kubesim.io/ray-driver": "idle"}}},
    )  # fmt: skip
    advance(sim, clock, 55)
    assert group(custom, "dev")["replicas"] == 3
    advance(sim, clock, 10)
    assert group(custom, "dev")["replicas"] == 0 and workers(core, "dev") == []


def test_an_invalid_autoscaling_spec_is_refused_in_kuberays_words(
    core: client.CoreV1Api, custom: client.CustomObjectsApi
) -> None:
    body = autoscaling_cluster("bad", low=0, high=2, idle=60)
    body["spec"]["workerGroupSpecs"][0]["idleTimeoutSeconds"] = 30
    custom.create_namespaced_custom_object("ray.io", "v1", "default", "rayclusters", body)
    assert core.list_namespaced_pod("default", label_selector="ray.io/cluster=bad").items == []
    assert events(core, "InvalidRayClusterSpec") == [
        "The RayCluster spec is invalid default/bad: worker group gpu: idleTimeoutSeconds is "
        "set, but autoscaler v2 is not enabled. Please set .spec.autoscalerOptions.version to "
        "'v2' (or set RAY_enable_autoscaler_v2 environment variable to 'true' in the head pod "
        "if using KubeRay < 1.4.0)"
    ]
