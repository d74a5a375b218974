"""Kubernetes objects from rows: pure functions, rows in and plain dicts out, no I/O.

The tenant bundle and the pieces every pod shares are built here; each kind builds its
own objects (``kinds/<kind>/manifests.py``); the queues' objects are in
:mod:`clusters.kube.queues`. Rows come with their relations loaded; nothing here
queries. Same rows in, byte-identical objects out: the golden files and idempotent
server-side applies rely on it. Shapes follow DESIGN "Cluster shapes" (a GPU-less head
on a CPU node, dev workers with one GPU, prod workers with a whole node).
"""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal
from typing import Any

import yaml
from django.conf import settings

from clusters.domain import shapes
from clusters.domain.workload_kinds import kind_of
from clusters.kube import labels as lbl
from clusters.kube import quantities as q
from clusters.kube.queues import (
    dra_device_class,
    kai_queue,
    kueue_objects,
)

__all__ = [
    "cluster_manifests",
    "kai_queue",
    "kueue_objects",
    "tenant_bundle",
    "to_yaml",
]

Manifest = dict[str, Any]

GPU = q.GPU
GPU_PRODUCT_LABEL = q.GPU_PRODUCT_LABEL
SERVICE_ACCOUNT = "gangway-ray"
RAY_UID = 1000  # the ``ray`` user of the rayproject/ray images
RAY_GID = 100
DASHBOARD_PORT = 8265
CLIENT_PORT = 10001
# JupyterLab on a head that asked for a notebook (docs/notebooks.md).
NOTEBOOK_PORT = 8888
GCS_PORT = 6379
AUTOSCALER_IDLE_TIMEOUT_SECONDS = 300
# Ray puts its object store in /dev/shm; a memory-backed emptyDir sized to a share of the
# pod's memory limit (the kubelet counts it against that limit).
SHM_SHARE = Decimal("0.3")
VOID_ENV = {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}
GPU_TOLERATION = {"key": GPU, "operator": "Exists", "effect": "NoSchedule"}


# --- shared pieces ----------------------------------------------------------------------


def object_metadata(name: str, labels: dict[str, str], namespace: str | None = None) -> Manifest:
    meta: Manifest = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    meta["labels"] = dict(sorted(labels.items()))
    return meta


def request_object(
    api_version: str, kind: str, cluster: Any, labels: dict[str, str], spec: Manifest
) -> Manifest:
    """A request's object of ``kind``: named after the request, in its tenant's namespace."""
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": object_metadata(str(cluster.name), labels, str(cluster.tenant.namespace)),
        "spec": spec,
    }


def container_security_context() -> Manifest:
    """Restricted Pod Security: non-root, no escalation, no capabilities, seccomp default."""
    return {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "privileged": False,
        "runAsNonRoot": True,
        "runAsUser": RAY_UID,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def pod_security_context() -> Manifest:
    return {
        "fsGroup": RAY_GID,
        "runAsGroup": RAY_GID,
        "runAsNonRoot": True,
        "runAsUser": RAY_UID,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def container_resources(cpu: Decimal, memory_gib: Decimal, gpus: int = 0) -> Manifest:
    amounts = {"cpu": q.cpu(cpu), "memory": q.memory_gib(memory_gib)}
    if gpus:
        amounts[GPU] = q.count(gpus)
    # Requests equal limits: Guaranteed QoS, and the scheduler's view is the real use.
    return {"limits": dict(amounts), "requests": dict(amounts)}


def shm_volume(memory_gib: Decimal) -> Manifest:
    share = memory_gib * SHM_SHARE
    # Whole GiB when there is room for one, so the quantity reads "537Gi", not "550502Mi".
    size = shapes.floor_to(share, "1") if share >= 1 else shapes.floor_to(share, "0.001")
    size = max(size, Decimal("0.001"))
    return {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": q.memory_gib(size)}}


# --- the tenant bundle ------------------------------------------------------------------


def tenant_bundle(
    tenant: Any,
    quotas: Iterable[Any],
    *,
    control_plane_namespace: str,
    max_clusters: int | None = None,
    max_pods: int | None = None,
) -> list[Manifest]:
    """Everything a tenant's namespace holds before any cluster: see DESIGN "Tenant isolation".

    Namespace (Pod Security ``enforce``: the tenant's level, ``baseline`` by default;
    ``warn`` and ``audit``: ``restricted``), ServiceAccount
    without a token, ResourceQuota, LimitRange and NetworkPolicies. Applied in this order
    (the namespace first).
    """
    ns = str(tenant.namespace)
    labels = lbl.tenant_labels(tenant)
    ns_labels = {
        **labels,
        "pod-security.kubernetes.io/enforce": pod_security_level(tenant),
        "pod-security.kubernetes.io/warn": "restricted",
        "pod-security.kubernetes.io/audit": "restricted",
    }
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": object_metadata(ns, ns_labels)},
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": object_metadata(SERVICE_ACCOUNT, labels, ns),
            "automountServiceAccountToken": False,
        },
        resource_quota(tenant, quotas, max_clusters=max_clusters, max_pods=max_pods),
        limit_range(tenant),
        *network_policies(tenant, control_plane_namespace=control_plane_namespace),
    ]


def pod_security_level(tenant: Any) -> str:
    """The tenant namespace's Pod Security Standard (``baseline`` unless ``restricted``)."""
    return str(getattr(tenant, "pod_security", "") or "baseline")


def resource_quota(
    tenant: Any,
    quotas: Iterable[Any],
    *,
    max_clusters: int | None = None,
    max_pods: int | None = None,
) -> Manifest:
    """The namespace's ResourceQuota, mirroring the tenant's quota rows.

    GPUs are nominal plus borrowing limit summed over flavors: borrowing is decided by
    the control plane (or Kueue), and Kubernetes must not refuse what they admitted. CPU
    and memory are the tenant's totals (0 means none, so no key). Clusters and pods are
    a generous backstop, not the working limit (per-user caps are): by default one
    cluster per GPU plus ten, and pods for a head each plus four per GPU (fractional
    workers share GPUs). A DRA flavor's quota is its device class's instead of
    ``nvidia.com/gpu``'s: the devices the namespace's claims of that class may request
    (``<class>.deviceclass.resource.k8s.io/devices``).
    """
    quota_list = list(quotas)
    gpus = sum(int(quota.gpus) + int(quota.borrow_limit) for quota in quota_list)
    devices: dict[str, int] = {}
    for quota in quota_list:
        cls = dra_device_class(quota)
        if cls:
            devices[cls] = devices.get(cls, 0) + int(quota.gpus) + int(quota.borrow_limit)
    clusters = max_clusters if max_clusters is not None else gpus + 10
    pods = max_pods if max_pods is not None else clusters + 4 * gpus
    hard: dict[str, str] = {
        f"requests.{GPU}": q.count(gpus - sum(devices.values())),
        **{f"{cls}.deviceclass.resource.k8s.io/devices": q.count(n) for cls, n in devices.items()},
        "pods": q.count(pods),
        "count/rayclusters.ray.io": q.count(clusters),
        "services.nodeports": "0",
        "services.loadbalancers": "0",
    }
    if tenant.cpu_quota:
        hard["requests.cpu"] = hard["limits.cpu"] = q.cpu(tenant.cpu_quota)
    if tenant.memory_quota_gib:
        hard["requests.memory"] = hard["limits.memory"] = q.memory_gib(tenant.memory_quota_gib)
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": object_metadata(
            "gangway-quota", lbl.tenant_labels(tenant), str(tenant.namespace)
        ),
        "spec": {"hard": dict(sorted(hard.items()))},
    }


def limit_range(tenant: Any) -> Manifest:
    """Defaults for containers that set no resources, so the CPU/memory quota admits them."""
    return {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": object_metadata(
            "gangway-limits", lbl.tenant_labels(tenant), str(tenant.namespace)
        ),
        "spec": {
            "limits": [
                {
                    "type": "Container",
                    "default": {"cpu": "1", "memory": "2Gi"},
                    "defaultRequest": {"cpu": "250m", "memory": "512Mi"},
                }
            ]
        },
    }


def network_policies(tenant: Any, *, control_plane_namespace: str) -> list[Manifest]:
    """Ingress: deny by default, allow the namespace itself and the control plane (Ray
    dashboard and client ports only: they have no authentication, CVE-2023-48022; and the
    API server's ``APISERVER_SOURCE_CIDRS`` to the dashboard port, for the proxy). Egress:
    DNS, the namespace itself and addresses outside the private ranges (object stores,
    package indexes), so a tenant's pods cannot reach another tenant's pods or services.
    """
    ns = str(tenant.namespace)
    labels = lbl.tenant_labels(tenant)
    apiserver = list(settings.APISERVER_SOURCE_CIDRS)

    def policy(name: str, spec: Manifest) -> Manifest:
        return {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": object_metadata(name, labels, ns),
            "spec": spec,
        }

    same_namespace: Manifest = {"podSelector": {}}
    return [
        policy("default-deny-ingress", {"podSelector": {}, "policyTypes": ["Ingress"]}),
        policy(
            "allow-same-namespace",
            {
                "podSelector": {},
                "policyTypes": ["Ingress"],
                "ingress": [{"from": [same_namespace]}],
            },
        ),
        policy(
            "allow-control-plane-to-ray",
            {
                "podSelector": {},
                "policyTypes": ["Ingress"],
                "ingress": [
                    {
                        "from": [
                            {
                                "namespaceSelector": {
                                    "matchLabels": {
                                        "kubernetes.io/metadata.name": control_plane_namespace
                                    }
                                }
                            }
                        ],
                        "ports": [
                            {"protocol": "TCP", "port": DASHBOARD_PORT},
                            {"protocol": "TCP", "port": CLIENT_PORT},
                            {"protocol": "TCP", "port": NOTEBOOK_PORT},
                        ],
                    },
                    # The dashboard proxy goes through the API server's service proxy,
                    # whose traffic comes from the API server's own addresses.
                    *(
                        [
                            {
                                "from": [{"ipBlock": {"cidr": cidr}} for cidr in apiserver],
                                "ports": [
                                    {"protocol": "TCP", "port": DASHBOARD_PORT},
                                    {"protocol": "TCP", "port": NOTEBOOK_PORT},
                                ],
                            }
                        ]
                        if apiserver
                        else []
                    ),
                ],
            },
        ),
        policy(
            "allow-egress-dns-namespace-external",
            {
                "podSelector": {},
                "policyTypes": ["Egress"],
                "egress": [
                    {
                        "to": [
                            {
                                "namespaceSelector": {
                                    "matchLabels": {"kubernetes.io/metadata.name": "kube-system"}
                                },
                                "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
                            }
                        ],
                        "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}],
                    },
                    {"to": [same_namespace]},
                    {
                        "to": [
                            {
                                "ipBlock": {
                                    "cidr": "0.0.0.0/0",
                                    "except": ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"],
                                }
                            }
                        ]
                    },
                ],
            },
        ),
    ]


def cluster_manifests(
    cluster: Any,
    *,
    image: str | None = None,
    queue_mode: str = "builtin",
    kai_enabled: bool = False,
) -> list[Manifest]:
    """What is applied for one request: its kind's objects (``kinds/<kind>/manifests.py``)."""
    return kind_of(cluster).behaviour.manifests(
        cluster, image=image, queue_mode=queue_mode, kai_enabled=kai_enabled
    )


# --- output -----------------------------------------------------------------------------


class _Dumper(yaml.SafeDumper):
    """Safe YAML with block-style lists indented under their key, as kubectl writes them."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)

    def ignore_aliases(self, data: Any) -> bool:
        # A shared dict must be written out in full each time: "&id001" anchors are valid
        # YAML but unreadable in a manifest.
        return True


def to_yaml(objects: Iterable[Manifest]) -> str:
    """One multi-document YAML stream (``---`` separated) a user can ``kubectl apply -f``."""
    return yaml.dump_all(
        list(objects),
        Dumper=_Dumper,
        sort_keys=True,
        default_flow_style=False,
        explicit_start=True,
        allow_unicode=False,
        width=1000,
    )
