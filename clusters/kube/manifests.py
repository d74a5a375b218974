"""Kubernetes objects from rows: pure functions, rows in and plain dicts out, no I/O.

The tenant bundle (namespace, service account, quota, limits, network policies) and the
``RayCluster`` of each request are built here; the Kueue and KAI queue objects live in
:mod:`clusters.kube.queues` and are re-exported. Callers pass rows whose relations are
already loaded (``select_related("tenant", "flavor", "owner")``) or unsaved instances
with them set; nothing here queries. Same rows in, byte-identical objects out: that is
what makes the golden files and idempotent server-side applies work.

Shapes follow DESIGN "Cluster shapes": the head has no GPU, runs on a CPU node and has
``NVIDIA_VISIBLE_DEVICES=void``; dev workers take one GPU and a proportional slice of a
node; production workers take a whole node; fractional dev workers are scheduled by KAI.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from decimal import Decimal
from typing import Any

import yaml
from django.conf import settings

from clusters.domain import shapes
from clusters.domain.images import ray_version, resolve_image
from clusters.kube import cdi
from clusters.kube import labels as lbl
from clusters.kube import quantities as q
from clusters.kube.provisioning_requests import consume_annotations
from clusters.kube.queues import (
    KAI_SCHEDULER,
    LOCAL_QUEUE_NAME,
    kai_queue,
    kai_queue_name,
    kueue_objects,
)

__all__ = [
    "cluster_manifests",
    "kai_queue",
    "kueue_objects",
    "raycluster",
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
GCS_PORT = 6379
AUTOSCALER_IDLE_TIMEOUT_SECONDS = 300
# Ray puts its object store in /dev/shm; a memory-backed emptyDir sized to a share of the
# pod's memory limit (the kubelet counts it against that limit).
SHM_SHARE = Decimal("0.3")
VOID_ENV = {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}
GPU_TOLERATION = {"key": GPU, "operator": "Exists", "effect": "NoSchedule"}


# --- shared pieces ----------------------------------------------------------------------


def _metadata(name: str, labels: dict[str, str], namespace: str | None = None) -> Manifest:
    meta: Manifest = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    meta["labels"] = dict(sorted(labels.items()))
    return meta


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


def _pod_security_context() -> Manifest:
    return {
        "fsGroup": RAY_GID,
        "runAsGroup": RAY_GID,
        "runAsNonRoot": True,
        "runAsUser": RAY_UID,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def _resources(cpu: Decimal, memory_gib: Decimal, gpus: int = 0) -> Manifest:
    amounts = {"cpu": q.cpu(cpu), "memory": q.memory_gib(memory_gib)}
    if gpus:
        amounts[GPU] = q.count(gpus)
    # Requests equal limits: Guaranteed QoS, and the scheduler's view is the real use.
    return {"limits": dict(amounts), "requests": dict(amounts)}


def _shm_volume(memory_gib: Decimal) -> Manifest:
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
        {"apiVersion": "v1", "kind": "Namespace", "metadata": _metadata(ns, ns_labels)},
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": _metadata(SERVICE_ACCOUNT, labels, ns),
            "automountServiceAccountToken": False,
        },
        resource_quota(tenant, quotas, max_clusters=max_clusters, max_pods=max_pods),
        limit_range(tenant),
        *network_policies(tenant, control_plane_namespace=control_plane_namespace),
    ]


def pod_security_level(tenant: Any) -> str:
    """The Pod Security Standard the tenant's namespace enforces: its ``pod_security``
    (``baseline`` unless a platform admin chose ``restricted``)."""
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
    workers share GPUs).
    """
    gpus = sum(int(quota.gpus) + int(quota.borrow_limit) for quota in quotas)
    clusters = max_clusters if max_clusters is not None else gpus + 10
    pods = max_pods if max_pods is not None else clusters + 4 * gpus
    hard: dict[str, str] = {
        f"requests.{GPU}": q.count(gpus),
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
        "metadata": _metadata("gangway-quota", lbl.tenant_labels(tenant), str(tenant.namespace)),
        "spec": {"hard": dict(sorted(hard.items()))},
    }


def limit_range(tenant: Any) -> Manifest:
    """Defaults for containers that set no resources, so the CPU/memory quota admits them."""
    return {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": _metadata("gangway-limits", lbl.tenant_labels(tenant), str(tenant.namespace)),
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
            "metadata": _metadata(name, labels, ns),
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
                        ],
                    },
                    # The dashboard proxy goes through the API server's service proxy,
                    # whose traffic comes from the API server's own addresses.
                    *(
                        [
                            {
                                "from": [{"ipBlock": {"cidr": cidr}} for cidr in apiserver],
                                "ports": [{"protocol": "TCP", "port": DASHBOARD_PORT}],
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


# --- the RayCluster ---------------------------------------------------------------------


def user_env(cluster: Any) -> list[Manifest]:
    """The request's own environment variables, sorted by name. They follow gangway's
    and never repeat one of its names: :mod:`clusters.domain.environment` refuses every name
    gangway, KubeRay or the NVIDIA runtime sets."""
    env = getattr(cluster, "env", None) or {}
    return [{"name": str(name), "value": str(env[name])} for name in sorted(env)]


def _head_group(cluster: Any, image: str, pod_labels: dict[str, str]) -> Manifest:
    container = {
        "name": "ray-head",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        # The head requests no GPU: without this the NVIDIA runtime would expose every GPU
        # of the node if it ever landed on an untainted GPU node (ray#29753).
        "env": [dict(VOID_ENV), *user_env(cluster)],
        "ports": [
            {"name": "gcs-server", "containerPort": GCS_PORT, "protocol": "TCP"},
            {"name": "dashboard", "containerPort": DASHBOARD_PORT, "protocol": "TCP"},
            {"name": "client", "containerPort": CLIENT_PORT, "protocol": "TCP"},
        ],
        "resources": _resources(shapes.HEAD_CPU, shapes.HEAD_MEMORY_GIB),
        "securityContext": container_security_context(),
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
    }
    return {
        "serviceType": "ClusterIP",
        "rayStartParams": {"dashboard-host": "0.0.0.0", "num-gpus": "0"},
        "template": {
            "metadata": {"labels": dict(sorted(pod_labels.items()))},
            # No GPU toleration and no GPU selector: the head runs on a CPU node and never
            # takes room a whole-node worker needs.
            "spec": _pod_spec([container], shapes.HEAD_MEMORY_GIB),
        },
    }


def _pod_spec(containers: list[Manifest], memory_gib: Decimal) -> Manifest:
    return {
        "serviceAccountName": SERVICE_ACCOUNT,
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "securityContext": _pod_security_context(),
        "containers": containers,
        "volumes": [_shm_volume(memory_gib)],
    }


def _worker_group(
    group: shapes.WorkerGroup,
    *,
    flavor: shapes.FlavorSpec,
    image: str,
    pod_labels: dict[str, str],
    kai_queue_label: str | None,
    products: Sequence[str] = (),
    env: Sequence[Manifest] = (),
    container_profile: str = "",
) -> Manifest:
    res = group.resources
    fractional = res.gpu_fraction is not None
    container: Manifest = {
        "name": "ray-worker",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "resources": _resources(res.cpu, res.memory_gib, res.gpus),
        "securityContext": container_security_context(),
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
    }
    containers_see_gpus = bool(container_profile) and res.gpus > 0
    own_env = cdi.ray_container_env() if containers_see_gpus else []
    if own_env or env:
        container["env"] = [*own_env, *env]
    # A fractional worker has no GPU limit but is given a (shared) device by KAI, which
    # sets the container's visible device itself; an explicit "void" would override it
    # and hide the GPU. It is the one container without a GPU limit that must not carry
    # "void" (see tests/clusters/kube/test_manifest_properties.py).
    spec = _pod_spec([container], res.memory_gib)
    if containers_see_gpus:
        # Each GPU worker writes a CDI spec of its own GPUs for the containers Ray runs
        # with podman (clusters/kube/cdi.py, docs/containers.md).
        container["securityContext"] = cdi.podman_security_context(
            container["securityContext"], seccomp_profile=container_profile
        )
        container["volumeMounts"].append(cdi.ray_container_mount())
        spec["initContainers"] = [
            cdi.init_container(
                image=image,
                gpu_resource=GPU,
                gpus=q.count(res.gpus),
                security_context=container_security_context(),
            )
        ]
        spec["volumes"].append(cdi.volume())
    if len(products) > 1:
        # The scheduler picks among the accepted flavors (Kueue, by flavor fungibility):
        # any node of theirs, and no other.
        spec["affinity"] = gpu_product_affinity(products)
    else:
        spec["nodeSelector"] = {GPU_PRODUCT_LABEL: flavor.gpu_product}
    spec["tolerations"] = [dict(GPU_TOLERATION)]
    metadata: Manifest = {"labels": dict(sorted(pod_labels.items()))}
    # KubeRay derives num-gpus from the GPU limit only when it is absent, and a fractional
    # pod has no limit, so it is always written: the limit for whole GPUs, and one
    # (shared) device for a fraction.
    num_gpus = "1" if fractional else str(res.gpus)
    if fractional:
        spec["schedulerName"] = KAI_SCHEDULER
        metadata["annotations"] = {"gpu-fraction": q.number(res.gpu_fraction or 0)}
        if kai_queue_label:
            metadata["labels"] = dict(
                sorted({**pod_labels, lbl.KAI_QUEUE: kai_queue_label}.items())
            )
    return {
        "groupName": group.name,
        "replicas": group.replicas,
        "minReplicas": group.min_replicas,
        "maxReplicas": group.max_replicas,
        "rayStartParams": {"num-gpus": num_gpus},
        "template": {"metadata": metadata, "spec": spec},
    }


def gpu_product_affinity(products: Sequence[str]) -> Manifest:
    """A required node affinity: a node whose GPU product is one of ``products``."""
    term = {"key": GPU_PRODUCT_LABEL, "operator": "In", "values": list(products)}
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [term]}]
            }
        }
    }


def _fungible_groups(
    cluster: Any, groups: Sequence[shapes.WorkerGroup], accepted: Sequence[shapes.FlavorSpec]
) -> Sequence[shapes.WorkerGroup]:
    """Where Kueue chooses among several accepted flavors: every worker asks for the
    smallest CPU and memory slice of them, since one pod template must fit a node of
    each. ``groups`` are shaped for the first of ``accepted``."""
    fitted = []
    for group in groups:
        res = group.resources
        for other in accepted[1:]:
            there = shapes.worker_resources(
                kind=cluster.kind, flavor=other, gpu_fraction=res.gpu_fraction
            )
            res = replace(
                res, cpu=min(res.cpu, there.cpu), memory_gib=min(res.memory_gib, there.memory_gib)
            )
        fitted.append(replace(group, resources=res))
    return fitted


def _booked_capacity(cluster: Any) -> str:
    """The ProvisioningRequest whose booking the workers consume: while the request is
    being started on capacity provisioned for it, else ``""``."""
    if getattr(cluster, "capacity_state", "") != "provisioned":
        return ""
    if str(getattr(cluster, "state", "")) not in ("queued", "admitted", "provisioning", "starting"):
        return ""
    return str(getattr(cluster, "capacity_request", "") or "")


def autoscaler_options() -> Manifest:
    """The in-tree autoscaler sidecar: small, hardened, and blind to GPUs like the head."""
    return {
        "idleTimeoutSeconds": AUTOSCALER_IDLE_TIMEOUT_SECONDS,
        "upscalingMode": "Default",
        "env": [dict(VOID_ENV)],
        "resources": _resources(shapes.AUTOSCALER_CPU, shapes.AUTOSCALER_MEMORY_GIB),
        "securityContext": container_security_context(),
    }


def _container_profile(cluster: Any, given: str | None) -> str:
    """The seccomp profile GPU workers run podman under: ``""`` unless the request
    opted in to ``container_gpus`` (which the services refuse without a profile)."""
    if not getattr(cluster, "container_gpus", False):
        return ""
    profile = settings.CONTAINER_GPUS_SECCOMP_PROFILE if given is None else given
    if not profile:
        raise ValueError("container_gpus needs a seccomp profile (container_profile).")
    return str(profile)


def raycluster(
    cluster: Any,
    *,
    image: str | None = None,
    queue_mode: str = "builtin",
    kai_enabled: bool = False,
    groups: Sequence[shapes.WorkerGroup] | None = None,
    container_profile: str | None = None,
) -> Manifest:
    """The ``ray.io/v1`` RayCluster of one request (saved or not).

    ``groups`` overrides the shape's worker groups (tests use it to check the group rules);
    they are validated with :func:`shapes.validate_worker_groups` before anything is built.
    In Kueue mode the object joins the tenant's LocalQueue with its kind's priority class;
    a fractional dev cluster (KAI) carries the tenant's KAI queue. The request's
    ``env`` goes into the head and worker containers after gangway's own; with
    ``container_gpus`` each GPU worker writes a CDI spec of its own GPUs
    (:mod:`clusters.kube.cdi`), run under ``container_profile`` (default: the
    ``CONTAINER_GPUS_SECCOMP_PROFILE`` setting).
    """
    flavor = shapes.flavor_spec(cluster.flavor)
    accepted: list[shapes.FlavorSpec] = []
    if queue_mode == "kueue" and len(cluster.accepted_flavors or []) > 1:
        # Kueue writes the RayCluster before admission and chooses the flavor itself: the
        # object is shaped for the accepted flavors in their order, whatever flavor the
        # row was admitted on, so that it stays the same once admitted.
        accepted = [shapes.flavor_spec(f) for f in cluster.accepted_flavor_rows()]
        flavor = accepted[0] if accepted else flavor
    fraction = Decimal(cluster.gpu_fraction) if cluster.gpu_fraction is not None else None
    if fraction is not None and not kai_enabled:
        raise ValueError("A fractional GPU cluster needs KAI (kai_enabled=True).")
    if groups is None:
        groups = shapes.worker_groups(
            kind=cluster.kind,
            flavor=flavor,
            workers=cluster.workers,
            min_workers=cluster.min_workers,
            max_workers=cluster.max_workers,
            gpu_fraction=fraction,
        )
    shapes.validate_worker_groups(groups, flavor=flavor)
    shapes.validate_name(str(cluster.name))
    chosen = resolve_image(cluster, image)
    labels = lbl.cluster_labels(cluster)
    object_labels = dict(labels)
    products = [f.gpu_product for f in accepted]
    if len(accepted) > 1:
        groups = _fungible_groups(cluster, groups, accepted)
    if queue_mode == "kueue":
        object_labels[lbl.KUEUE_QUEUE_NAME] = LOCAL_QUEUE_NAME
        object_labels[lbl.KUEUE_PRIORITY_CLASS] = str(cluster.kind)
    kai_label = kai_queue_name(cluster.tenant) if fraction is not None else None
    if kai_label:
        object_labels[lbl.KAI_QUEUE] = kai_label
    spec: Manifest = {}
    version = ray_version(chosen)
    if version:
        spec["rayVersion"] = version
    autoscaling = any(group.autoscaling for group in groups)
    spec["enableInTreeAutoscaling"] = autoscaling
    if autoscaling:
        spec["autoscalerOptions"] = autoscaler_options()
    spec["headGroupSpec"] = _head_group(cluster, chosen, labels)
    profile = _container_profile(cluster, container_profile)
    spec["workerGroupSpecs"] = [
        _worker_group(
            g,
            flavor=flavor,
            image=chosen,
            pod_labels=labels,
            kai_queue_label=kai_label,
            products=products,
            env=user_env(cluster),
            container_profile=profile,
        )
        for g in groups
    ]
    booked = _booked_capacity(cluster)
    if booked:
        # The autoscaler added nodes for this gang (capacity on demand): its workers
        # consume that booking, so the new nodes are theirs.
        for group in spec["workerGroupSpecs"]:
            meta = group["template"]["metadata"]
            meta["annotations"] = {**meta.get("annotations", {}), **consume_annotations(booked)}
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": _metadata(str(cluster.name), object_labels, str(cluster.tenant.namespace)),
        "spec": spec,
    }


# --- the RayJob -------------------------------------------------------------------------

SUBMITTER_CPU = Decimal("0.5")
SUBMITTER_MEMORY_GIB = Decimal("0.5")
# KubeRay's key for "run on this existing RayCluster" in ``clusterSelector``.
HOST_SELECTOR_KEY = "ray.io/cluster"


def _submitter_template(cluster: Any, image: str, pod_labels: dict[str, str]) -> Manifest:
    """The pod that runs ``ray job submit`` and follows the driver's output (KubeRay's
    K8sJobMode). KubeRay fills in the command; what is set here is what the platform
    requires of every pod: hardened, blind to GPUs, small, and labelled as ours so the
    reconciler finds it (and its logs) by the request's id."""
    container = {
        "name": "ray-job-submitter",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "env": [dict(VOID_ENV)],
        "resources": _resources(SUBMITTER_CPU, SUBMITTER_MEMORY_GIB),
        "securityContext": container_security_context(),
    }
    return {
        "metadata": {"labels": dict(sorted(pod_labels.items()))},
        "spec": {
            "restartPolicy": "Never",
            "serviceAccountName": SERVICE_ACCOUNT,
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            "securityContext": _pod_security_context(),
            "containers": [container],
        },
    }


def rayjob(
    cluster: Any,
    job: Any,
    *,
    image: str | None = None,
    queue_mode: str = "builtin",
    kai_enabled: bool = False,
    suspend: bool | None = None,
) -> Manifest:
    """The ``ray.io/v1`` RayJob of one job request (saved or not).

    Its Ray cluster is the RayCluster a cluster request of the same shape would get
    (:func:`raycluster`: one code path, so the GPU rules hold for jobs too), torn down as
    soon as the driver ends (``shutdownAfterJobFinishes``; ``ttlSecondsAfterFinished``
    keeps it that long for inspection). A job with a host runs on that existing
    RayCluster (``clusterSelector``) and brings none. ``suspend`` is left out when the
    queue backend owns it (Kueue unsuspends what it admits).
    """
    chosen = resolve_image(cluster, image)
    labels = lbl.cluster_labels(cluster)
    object_labels = dict(labels)
    host = getattr(job, "host", None)
    spec: Manifest = {
        "entrypoint": str(job.entrypoint),
        "submissionMode": "K8sJobMode",
        # A failed driver is a result to report, not something to run again unasked.
        "backoffLimit": 0,
    }
    if job.runtime_env:
        spec["runtimeEnvYAML"] = yaml.safe_dump(dict(job.runtime_env), sort_keys=True)
    if job.active_deadline_seconds:
        spec["activeDeadlineSeconds"] = int(job.active_deadline_seconds)
    if host is not None:
        # Kueue refuses to manage a RayJob that uses an existing cluster: it takes no
        # quota of its own, so it joins no queue.
        spec["clusterSelector"] = {HOST_SELECTOR_KEY: str(host.name)}
        spec["shutdownAfterJobFinishes"] = False
    else:
        if queue_mode == "kueue":
            object_labels[lbl.KUEUE_QUEUE_NAME] = LOCAL_QUEUE_NAME
            object_labels[lbl.KUEUE_PRIORITY_CLASS] = str(cluster.kind)
        spec["shutdownAfterJobFinishes"] = True
        spec["ttlSecondsAfterFinished"] = int(job.ttl_seconds_after_finished or 0)
        # Shaped as the queue mode shapes a RayCluster (under Kueue, a request of several
        # flavors leaves the choice to Kueue); the RayCluster's own queue labels are not
        # part of its spec, and the RayJob carries them instead.
        spec["rayClusterSpec"] = raycluster(
            cluster, image=chosen, queue_mode=queue_mode, kai_enabled=kai_enabled
        )["spec"]
    spec["submitterPodTemplate"] = _submitter_template(cluster, chosen, labels)
    if suspend is not None:
        spec["suspend"] = suspend
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": _metadata(str(cluster.name), object_labels, str(cluster.tenant.namespace)),
        "spec": spec,
    }


def cluster_manifests(
    cluster: Any,
    *,
    image: str | None = None,
    queue_mode: str = "builtin",
    kai_enabled: bool = False,
) -> list[Manifest]:
    """What is applied for one request: its RayCluster, or a job's RayJob."""
    if getattr(cluster, "workload", "cluster") == "job":
        job = getattr(cluster, "_job_details", None) or cluster.job
        return [rayjob(cluster, job, image=image, queue_mode=queue_mode, kai_enabled=kai_enabled)]
    return [raycluster(cluster, image=image, queue_mode=queue_mode, kai_enabled=kai_enabled)]


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
