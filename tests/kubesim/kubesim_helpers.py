"""Manifest builders shared by the kubesim tests (imported as ``kubesim_helpers``)."""

from __future__ import annotations

import copy
from typing import Any

from kubernetes import client

H100 = "NVIDIA-H100-80GB-HBM3"
L4 = "NVIDIA-L4"
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
# One H100 node whose two GPUs the DRA driver manages (no nvidia.com/gpu), each in seven
# 1g.10gb MIG slices, beside CPU nodes for Ray heads.
MIG_FLEET: dict[str, Any] = {
    "name": "mig",
    "pools": [
        {
            "name": "h100",
            "count": 1,
            "labels": {
                "nvidia.com/gpu.product": H100,
                "nvidia.com/gpu.count": "2",
                "nvidia.com/gpu.memory": "81559",
            },
            "allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110"},
            "taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}],
            "mig": {"profile": "1g.10gb", "perGpu": 7},
        },
        {"name": "cpu", "count": 2, "allocatable": {"cpu": "32", "memory": "128Gi"}},
    ],
}


def container(
    name: str = "main",
    cpu: str = "1",
    memory: str = "1Gi",
    gpu: int = 0,
    image: str = "rayproject/ray:2.40.0",
) -> dict[str, Any]:
    """A container with equal requests and limits."""
    res: dict[str, str] = {"cpu": cpu, "memory": memory}
    if gpu:
        res["nvidia.com/gpu"] = str(gpu)
    return {"name": name, "image": image, "resources": {"requests": dict(res), "limits": dict(res)}}


def pod_manifest(
    name: str,
    namespace: str = "default",
    gpu: int = 0,
    cpu: str = "1",
    memory: str = "1Gi",
    product: str | None = None,
    tolerate: bool = False,
    image: str = "rayproject/ray:2.40.0",
    **spec: Any,
) -> dict[str, Any]:
    """A bare pod."""
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "containers": [container(cpu=cpu, memory=memory, gpu=gpu, image=image)],
            **spec,
        },
    }
    if product:
        body["spec"]["nodeSelector"] = {"nvidia.com/gpu.product": product}
    if tolerate:
        body["spec"]["tolerations"] = [dict(GPU_TOLERATION)]
    return body


def raycluster(
    name: str,
    namespace: str = "default",
    workers: int = 1,
    gpus: int = 1,
    product: str = H100,
    labels: dict[str, str] | None = None,
    suspend: bool | None = None,
) -> dict[str, Any]:
    """A RayCluster in the control plane's dev-cluster shape (head on CPU nodes)."""
    worker = container("ray-worker", cpu="16", memory="64Gi", gpu=gpus)
    spec: dict[str, Any] = {
        "headGroupSpec": {
            "rayStartParams": {"num-gpus": "0"},
            "template": {"spec": {"containers": [container("ray-head", cpu="2", memory="8Gi")]}},
        },
        "workerGroupSpecs": [
            {
                "groupName": "gpu",
                "replicas": workers,
                "minReplicas": 0,
                "maxReplicas": max(workers, 1),
                "rayStartParams": {"num-gpus": str(gpus)},
                "template": {
                    "spec": {
                        "containers": [worker],
                        "nodeSelector": {"nvidia.com/gpu.product": product},
                        "tolerations": [dict(GPU_TOLERATION)],
                    }
                },
            }
        ],
    }
    if suspend is not None:
        spec["suspend"] = suspend
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": name, "namespace": namespace, "labels": copy.deepcopy(labels or {})},
        "spec": spec,
    }


def apply(custom: client.CustomObjectsApi, body: dict[str, Any]) -> dict[str, Any] | None:
    """Server-side apply of a RayCluster the way the gateway does it (None on create: the
    server answers 201, which the client does not map for this call)."""
    meta = body["metadata"]
    result: dict[str, Any] | None = custom.patch_namespaced_custom_object(
        "ray.io",
        "v1",
        meta["namespace"],
        "rayclusters",
        meta["name"],
        body,
        field_manager="gangway",
        force=True,
        _content_type="application/apply-patch+yaml",
    )
    return result


def get_rc(
    custom: client.CustomObjectsApi, name: str, namespace: str = "default"
) -> dict[str, Any]:
    """Read a RayCluster."""
    result: dict[str, Any] = custom.get_namespaced_custom_object(
        "ray.io", "v1", namespace, "rayclusters", name
    )
    return result


def rayjob(
    name: str,
    namespace: str = "default",
    workers: int = 1,
    gpus: int = 1,
    entrypoint: str = "python train.py",
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A RayJob whose cluster is :func:`raycluster`'s shape; ``spec`` adds RayJob fields
    (``suspend``, ``shutdownAfterJobFinishes``, ``activeDeadlineSeconds``, ...)."""
    rc_spec = raycluster("x", workers=workers, gpus=gpus)["spec"]
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "annotations": dict(annotations or {}),
            "labels": dict(labels or {}),
        },
        "spec": {"entrypoint": entrypoint, "rayClusterSpec": rc_spec, **spec},
    }
