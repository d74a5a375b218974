"""Init containers in the scheduler's and the quota's accounting: as Kubernetes counts
them, a pod's effective request of each resource is the larger of its largest init
container's and the sum of its app containers' (they never run at the same time). The
CDI init container of a GPU worker (clusters/kube/cdi.py) asks for the worker's GPUs
again, and must not double them. And Pod Security admission of such a worker: baseline
admits it, restricted refuses it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubesim_helpers import H100, apply, container, get_rc, pod_manifest, raycluster

from kubesim.admission import pod_totals


def test_effective_request_is_the_larger_of_init_and_app_per_resource() -> None:
    pod = {
        "spec": {
            "initContainers": [
                container("a", cpu="100m", memory="128Mi", gpu=8),
                container("b", cpu="6", memory="1Gi"),
            ],
            "containers": [
                container("x", cpu="2", memory="4Gi", gpu=8),
                container("y", cpu="1", memory="1Gi"),
            ],
        }
    }
    requests, limits = pod_totals(pod)
    # GPUs: max(8, 8) not 16; CPU: the init container "b" (6) beats the apps' 3;
    # memory: the apps' 5Gi beat any single init container.
    assert requests["nvidia.com/gpu"] == 8 and limits["nvidia.com/gpu"] == 8
    assert requests["cpu"] == pod_totals({"spec": {"containers": [container(cpu="6")]}})[0]["cpu"]
    assert requests["memory"] == 5 * 1024**3


def test_a_worker_with_a_gpu_init_container_fits_a_whole_node(core: client.CoreV1Api) -> None:
    body = pod_manifest("w", gpu=8, cpu="100", memory="1Ti", product=H100, tolerate=True)
    body["spec"]["initContainers"] = [container("cdi", cpu="100m", memory="128Mi", gpu=8)]
    core.create_namespaced_pod("default", body)
    pod = core.read_namespaced_pod("w", "default")
    # Summed, it would ask for 16 GPUs of an 8-GPU node and never be scheduled.
    assert pod.spec.node_name and pod.spec.node_name.startswith("demo-h100-")
    assert pod.status.phase == "Running"


def test_a_raycluster_with_gpu_init_containers_runs_whole_node_workers(
    core: client.CoreV1Api, custom: client.CustomObjectsApi
) -> None:
    body = raycluster("nested", workers=2, gpus=8)
    group = body["spec"]["workerGroupSpecs"][0]
    group["template"]["spec"]["containers"][0]["resources"] = container(
        cpu="100", memory="1Ti", gpu=8
    )["resources"]
    group["template"]["spec"]["initContainers"] = [
        container("gpu-cdi-spec", cpu="100m", memory="128Mi", gpu=8)
    ]
    apply(custom, body)
    status = get_rc(custom, "nested")["status"]
    assert status["state"] == "ready" and status["desiredGPU"] == "16"
    workers = core.list_pod_for_all_namespaces(
        label_selector="ray.io/cluster=nested,ray.io/node-type=worker"
    ).items
    assert len(workers) == 2 and all(w.status.phase == "Running" for w in workers)
    assert len({w.spec.node_name for w in workers}) == 2


def _namespace(core: client.CoreV1Api, name: str, level: str) -> None:
    labels = {"pod-security.kubernetes.io/enforce": level}
    core.create_namespace({"metadata": {"name": name, "labels": labels}})


def _nested_worker(name: str, namespace: str) -> dict[str, Any]:
    """A worker pod shaped as gangway's container_gpus workers are (clusters/kube/cdi.py):
    a hardened CDI init container, and a Ray container that runs rootless podman."""
    hardened = {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "runAsNonRoot": True,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    podman = {
        **hardened,
        "allowPrivilegeEscalation": True,
        "capabilities": {"add": ["SETGID", "SETUID"], "drop": ["ALL"]},
        "seccompProfile": {"type": "Localhost", "localhostProfile": "profiles/podman.json"},
    }
    body = pod_manifest(name, namespace, gpu=1, product=H100, tolerate=True)
    body["spec"]["containers"][0]["securityContext"] = podman
    body["spec"]["initContainers"] = [{**container("cdi", gpu=1), "securityContext": hardened}]
    body["spec"]["volumes"] = [{"name": "cdi", "emptyDir": {}}]
    return body


def test_pod_security_admits_nested_podman_under_baseline_only(core: client.CoreV1Api) -> None:
    _namespace(core, "base", "baseline")
    _namespace(core, "strict", "restricted")
    core.create_namespaced_pod("base", _nested_worker("w", "base"))
    assert core.read_namespaced_pod("w", "base").spec.node_name
    with pytest.raises(ApiException) as refused:
        core.create_namespaced_pod("strict", _nested_worker("w", "strict"))
    assert refused.value.status == 403
    message = json.loads(refused.value.body)["message"]
    assert message.startswith('pods "w" is forbidden: violates PodSecurity "restricted:latest": ')
    assert 'allowPrivilegeEscalation != false (container "main" must set' in message
    assert 'must not include "SETGID", "SETUID" in securityContext.capabilities.add' in message
    assert '"cdi"' not in message  # the init container is as hardened as restricted asks


def test_baseline_refuses_privileged_and_host_paths(core: client.CoreV1Api) -> None:
    _namespace(core, "base", "baseline")
    body = pod_manifest("p", "base")
    body["spec"]["containers"][0]["securityContext"] = {
        "privileged": True,
        "capabilities": {"add": ["SYS_ADMIN"]},
    }
    body["spec"]["volumes"] = [{"name": "root", "hostPath": {"path": "/"}}]
    with pytest.raises(ApiException) as refused:
        core.create_namespaced_pod("base", body)
    message = json.loads(refused.value.body)["message"]
    assert 'privileged (container "main" must not set securityContext.privileged=true)' in message
    assert (
        'must not include "SYS_ADMIN"' in message and 'hostPath volumes (volume "root")' in message
    )
