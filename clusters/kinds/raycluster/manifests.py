"""An interactive cluster's object: its ``RayCluster``, pure, rows in and dicts out.

Shapes follow DESIGN "Cluster shapes": the head has no GPU, runs on a CPU node and has
``NVIDIA_VISIBLE_DEVICES=void``; dev workers take one GPU and a proportional slice of a
node; production workers take a whole node; fractional dev workers are scheduled by KAI.
A job's Ray cluster is built here too (:mod:`clusters.kinds.rayjob.manifests`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from decimal import Decimal
from typing import Any

from django.conf import settings

from clusters.domain import shapes
from clusters.domain.images import ray_version, resolve_image
from clusters.kube import cdi, dra, notebook, priority_classes, ssh, topology, topology_queues
from clusters.kube import labels as lbl
from clusters.kube import quantities as q
from clusters.kube.manifests import (
    AUTOSCALER_IDLE_TIMEOUT_SECONDS,
    CLIENT_PORT,
    DASHBOARD_PORT,
    GCS_PORT,
    GPU,
    GPU_PRODUCT_LABEL,
    GPU_TOLERATION,
    SERVICE_ACCOUNT,
    VOID_ENV,
    Manifest,
    container_resources,
    container_security_context,
    pod_security_context,
    request_object,
    shm_volume,
)
from clusters.kube.preemption_pods import add_notice_channel
from clusters.kube.provisioning_requests import consume_annotations
from clusters.kube.queues import KAI_SCHEDULER, LOCAL_QUEUE_NAME, kai_queue_name


def user_env(cluster: Any) -> list[Manifest]:
    """The request's own variables, sorted, after gangway's (which
    :mod:`clusters.domain.environment` keeps them from repeating)."""
    env = getattr(cluster, "env", None) or {}
    return [{"name": str(name), "value": str(env[name])} for name in sorted(env)]


def _head_group(cluster: Any, image: str, pod_labels: dict[str, str]) -> Manifest:
    container: Manifest = {
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
        "resources": container_resources(shapes.HEAD_CPU, shapes.HEAD_MEMORY_GIB),
        "securityContext": container_security_context(),
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
    }
    params = {"dashboard-host": "0.0.0.0", "num-gpus": "0"}
    if getattr(cluster, "notebook", False):
        notebook.head_container_patch(container, slug=cluster.tenant.slug, name=str(cluster.name))
        # ``ray start`` returns, and the container's args (JupyterLab) keep it running.
        params["block"] = "false"
    spec = _pod_spec([container], shapes.HEAD_MEMORY_GIB)
    if getattr(cluster, "ssh", False):
        ssh.add_to_head(container, spec, str(cluster.name))
    return {
        "serviceType": "ClusterIP",
        "rayStartParams": params,
        "template": {
            "metadata": {"labels": dict(sorted(pod_labels.items()))},
            # No GPU toleration and no GPU selector: the head runs on a CPU node and never
            # takes room a whole-node worker needs.
            "spec": spec,
        },
    }


def _pod_spec(containers: list[Manifest], memory_gib: Decimal) -> Manifest:
    return {
        "serviceAccountName": SERVICE_ACCOUNT,
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "securityContext": pod_security_context(),
        "containers": containers,
        "volumes": [shm_volume(memory_gib)],
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
    claim_template: str = "",
) -> Manifest:
    res = group.resources
    fractional = res.gpu_fraction is not None
    # A DRA worker's GPUs come from its claim (``claim_template``), not a GPU limit.
    claims = bool(claim_template) and res.gpus > 0
    container: Manifest = {
        "name": "ray-worker",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "resources": container_resources(res.cpu, res.memory_gib, 0 if claims else res.gpus),
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
                gpu_resource="" if claims else GPU,
                gpus=q.count(res.gpus),
                security_context=container_security_context(),
            )
        ]
        spec["volumes"].append(cdi.volume())
    if claims:
        dra.claim_from_template(spec, container, claim_template)
        for init in spec.get("initContainers", ()):
            # The init container shares the pod's claim: it sees the same devices, and
            # writes the CDI spec of exactly those (clusters/kube/cdi.py).
            init["resources"]["claims"] = [{"name": dra.CLAIM}]
    if len(products) > 1:
        # The scheduler picks among the accepted flavors (Kueue, by flavor fungibility):
        # any node of theirs, and no other.
        spec["affinity"] = gpu_product_affinity(products)
    else:
        spec["nodeSelector"] = {GPU_PRODUCT_LABEL: flavor.gpu_product}
    spec["tolerations"] = [dict(GPU_TOLERATION)]
    metadata: Manifest = {"labels": dict(sorted(pod_labels.items()))}
    # KubeRay derives num-gpus from the GPU limit only when it is absent, and a fractional
    # pod or a DRA worker has no limit, so it is always written: the limit (or the claimed
    # devices) for whole GPUs, and one (shared) device for a fraction.
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
        "resources": container_resources(shapes.AUTOSCALER_CPU, shapes.AUTOSCALER_MEMORY_GIB),
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


def _shaped(
    cluster: Any,
    *,
    queue_mode: str,
    kai_enabled: bool,
    groups: Sequence[shapes.WorkerGroup] | None,
) -> tuple[shapes.FlavorSpec, list[shapes.FlavorSpec], Sequence[shapes.WorkerGroup]]:
    """The flavor a request's objects are shaped for, the flavors Kueue chooses among
    (empty unless several), and its worker groups, validated."""
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
    return flavor, accepted, groups


def _claim_template_name(cluster: Any, flavor: shapes.FlavorSpec, group: Any) -> str:
    """The ResourceClaimTemplate a group's workers claim their GPUs from ("" for none:
    an extended-resource flavor, a CPU group, or a KAI fraction)."""
    res = group.resources
    if not flavor.uses_dra or res.gpus <= 0 or res.gpu_fraction is not None:
        return ""
    return dra.template_name(str(cluster.name), group.name)


def claim_templates(
    cluster: Any,
    *,
    queue_mode: str = "builtin",
    kai_enabled: bool = False,
    groups: Sequence[shapes.WorkerGroup] | None = None,
    **_options: Any,
) -> list[Manifest]:
    """The ResourceClaimTemplates of a request on a DRA flavor: one per GPU worker group,
    each claim exactly one worker's GPUs (a whole-node worker's: every GPU of the node).
    Applied before the Ray object whose pods name them; none for other flavors."""
    flavor, _, groups = _shaped(
        cluster, queue_mode=queue_mode, kai_enabled=kai_enabled, groups=groups
    )
    # The request's labels, and the Ray object's name, by which they are deleted with it;
    # their claims carry the request's, by which they are read.
    claim_labels = lbl.cluster_labels(cluster)
    labels = {**claim_labels, lbl.OBJECT: str(cluster.name)}
    found = []
    for group in groups:
        name = _claim_template_name(cluster, flavor, group)
        if name:
            found.append(
                dra.claim_template(
                    name=name,
                    namespace=str(cluster.tenant.namespace),
                    labels=labels,
                    claim_labels=claim_labels,
                    flavor=flavor,
                    count=int(group.resources.gpus),
                )
            )
    return found


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
    flavor, accepted, groups = _shaped(
        cluster, queue_mode=queue_mode, kai_enabled=kai_enabled, groups=groups
    )
    fraction = Decimal(cluster.gpu_fraction) if cluster.gpu_fraction is not None else None
    shapes.validate_name(str(cluster.name))
    chosen = resolve_image(cluster, image)
    labels = lbl.cluster_labels(cluster)
    object_labels = dict(labels)
    products = [f.gpu_product for f in accepted]
    if len(accepted) > 1:
        groups = _fungible_groups(cluster, groups, accepted)
    if queue_mode == "kueue":
        object_labels[lbl.KUEUE_QUEUE_NAME] = LOCAL_QUEUE_NAME
        object_labels[lbl.KUEUE_PRIORITY_CLASS] = priority_classes.kueue_label(cluster)
    kai_label = kai_queue_name(cluster.tenant) if fraction is not None else None
    if kai_label:
        object_labels[lbl.KAI_QUEUE] = kai_label
        object_labels.update(priority_classes.kai_labels(cluster))
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
            claim_template=_claim_template_name(cluster, flavor, g),
        )
        for g in groups
    ]
    topology.keep_together(
        cluster,
        spec["workerGroupSpecs"],
        pin=queue_mode != "kueue",
        levels=tuple(getattr(cluster.flavor, "topology", None) or ()),
    )
    if queue_mode == "kueue":
        # The catalogue rows: their topology levels decide the pod sets' TAS annotation.
        rows = cluster.accepted_flavor_rows() if len(accepted) > 1 else [cluster.flavor]
        topology_queues.mark_worker_groups(cluster, spec["workerGroupSpecs"], rows)
    _notice_channel(cluster, spec)
    booked = _booked_capacity(cluster)
    if booked:
        # The autoscaler added nodes for this gang (capacity on demand): its workers
        # consume that booking, so the new nodes are theirs.
        for group in spec["workerGroupSpecs"]:
            meta = group["template"]["metadata"]
            meta["annotations"] = {**meta.get("annotations", {}), **consume_annotations(booked)}
    obj = request_object("ray.io/v1", "RayCluster", cluster, object_labels, spec)
    asks = topology_queues.kai_annotations(cluster, cluster.flavor) if kai_enabled else {}
    if asks:
        obj["metadata"]["annotations"] = asks  # KAI's pod grouper reads the top owner
    return obj


def _notice_channel(cluster: Any, spec: Manifest) -> None:
    """The preemption notice's volume and environment in the head's and every worker's
    Ray container (:mod:`clusters.kube.preemption_pods`)."""
    groups = [spec["headGroupSpec"], *spec["workerGroupSpecs"]]
    for group in groups:
        pod = group["template"]["spec"]
        ray = [c for c in pod["containers"] if c["name"] in ("ray-head", "ray-worker")]
        add_notice_channel(pod, ray, cluster)


def manifests(cluster: Any, **options: Any) -> list[Manifest]:
    """One interactive cluster's objects: its claim templates (DRA flavors), then its
    RayCluster (``options`` as :func:`raycluster`)."""
    return [*claim_templates(cluster, **options), raycluster(cluster, **options)]
