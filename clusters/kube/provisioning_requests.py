"""Capacity on demand (built-in queue): the ProvisioningRequest that asks the cluster
autoscaler for a gang's nodes, and the PodTemplates it points at. Pure: rows -> objects.

One ``best-effort-atomic-scale-up`` request per gang: the autoscaler adds the nodes
for every GPU pod of the gang, or none. Its pod sets are the gang's worker groups as the
manifests build them, so it reasons about the very pods that will run; once
``Provisioned``, the workers carry the annotation that consumes the booking
(:func:`consume_annotations`).
"""

from __future__ import annotations

from typing import Any

from clusters.kube import labels as lbl

Manifest = dict[str, Any]

API = "autoscaling.x-k8s.io/v1"
ATOMIC_SCALE_UP = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
CONSUME = "autoscaling.x-k8s.io/consume-provisioning-request"
CLASS = "autoscaling.x-k8s.io/provisioning-class-name"


def request_name(cluster: Any, attempt: int) -> str:
    """The ProvisioningRequest of one attempt (a failed one is replaced by the next)."""
    return f"{cluster.name}-nodes-{attempt}"


def template_name(request: str, group: str) -> str:
    """The PodTemplate of one worker group of a request."""
    return f"{request}-{group}"[:253]


def _worker_groups(cluster_spec: Manifest) -> list[Manifest]:
    return [g for g in cluster_spec.get("workerGroupSpecs") or [] if int(g.get("replicas") or 0)]


def capacity_objects(cluster: Any, ray_cluster_spec: Manifest, *, name: str) -> list[Manifest]:
    """The PodTemplates (first: the request must find them) and the ProvisioningRequest
    for the worker groups of ``ray_cluster_spec`` (a RayCluster's, or a RayJob's
    ``rayClusterSpec``)."""
    labels = lbl.cluster_labels(cluster)
    namespace = str(cluster.tenant.namespace)
    objects: list[Manifest] = []
    pod_sets = []
    for group in _worker_groups(ray_cluster_spec):
        template = template_name(name, str(group["groupName"]))
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "PodTemplate",
                "metadata": {"name": template, "namespace": namespace, "labels": dict(labels)},
                "template": group["template"],
            }
        )
        pod_sets.append({"podTemplateRef": {"name": template}, "count": int(group["replicas"])})
    objects.append(
        {
            "apiVersion": API,
            "kind": "ProvisioningRequest",
            "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
            "spec": {"provisioningClassName": ATOMIC_SCALE_UP, "podSets": pod_sets},
        }
    )
    return objects


def consume_annotations(name: str) -> dict[str, str]:
    """What a worker pod carries to take the capacity booked for request ``name``."""
    return {CONSUME: name, CLASS: ATOMIC_SCALE_UP}
