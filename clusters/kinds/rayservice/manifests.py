"""A service's object: its ``RayService``, pure, rows in and dicts out. Its Ray cluster
is the RayCluster an interactive cluster of the same shape gets (one code path for the
GPU rules), with the head's Serve port named as KubeRay's serve service looks for it."""

from __future__ import annotations

from typing import Any

from clusters.domain import shapes
from clusters.domain.images import resolve_image
from clusters.kinds.raycluster.manifests import claim_templates, raycluster
from clusters.kinds.rayservice.spec import INCREMENTAL, surge_workers
from clusters.kube import labels as lbl
from clusters.kube import priority_classes
from clusters.kube.manifests import Manifest, request_object
from clusters.kube.queues import LOCAL_QUEUE_NAME

# Kueue's elastic jobs (ElasticJobsViaWorkloadSlices): the opt-in annotation and the
# scheduling gate its webhook puts on every pod template of one; its validating webhook
# refuses an update whose templates lack the gate, so the gate is written here too.
ELASTIC_JOB = "kueue.x-k8s.io/elastic-job"

SERVE_PORT = 8000
# KubeRay requires a Gateway class for incremental upgrades; the product routes no
# traffic through a Gateway (yet), so this names the class it would use.
GATEWAY_CLASS_NAME = "gangway-serve"


def autoscales(cluster: Any) -> bool:
    """Whether the service's worker group autoscales (an incremental upgrade needs it)."""
    _, low, high = shapes.replica_bounds(
        kind=str(cluster.kind),
        workers=int(cluster.workers),
        min_workers=cluster.min_workers,
        max_workers=cluster.max_workers,
    )
    return low != high


def _with_serve_port(spec: Manifest) -> Manifest:
    """The cluster spec with the head container's ``serve`` port (KubeRay's serve
    service targets it)."""
    head = spec["headGroupSpec"]["template"]["spec"]["containers"][0]
    ports = head.setdefault("ports", [])
    if not any(p.get("name") == "serve" for p in ports):
        ports.append({"name": "serve", "containerPort": SERVE_PORT, "protocol": "TCP"})
    return spec


def _elastic(spec: Manifest) -> Manifest:
    """The cluster spec with Kueue's elastic-job gate on the head and worker templates."""
    groups = [spec["headGroupSpec"], *spec.get("workerGroupSpecs", [])]
    for group in groups:
        gates = group["template"]["spec"].setdefault("schedulingGates", [])
        if {"name": ELASTIC_JOB} not in gates:
            gates.append({"name": ELASTIC_JOB})
    return spec


def _guaranteed_size(spec: Manifest, cluster: Any, details: Any) -> None:
    """An autoscaling service's worker group at its guaranteed size (``min_workers``):
    it is charged at that, and what it may run beyond is written on its RayCluster as
    growth is admitted (:mod:`clusters.kinds.rayservice.growth`), never here, since a
    RayService whose cluster spec changes (beyond worker ``replicas``) brings up a new
    cluster. Under an incremental upgrade its floor is the upgrade's surge: KubeRay
    starts the new cluster at ``minReplicas``, and the old one gives its workers back
    as its capacity is lowered."""
    if not autoscales(cluster):
        return
    for group in spec.get("workerGroupSpecs") or []:
        low = int(group["minReplicas"])
        group["replicas"] = group["maxReplicas"] = low
        group["minReplicas"] = surge_workers(
            str(details.upgrade_type), details.upgrade_options or {}, low
        )


def upgrade_strategy(details: Any) -> Manifest:
    """KubeRay's ``upgradeStrategy`` of the service's details."""
    strategy: Manifest = {"type": str(details.upgrade_type)}
    if details.upgrade_type == INCREMENTAL:
        options = dict(details.upgrade_options or {})
        strategy["clusterUpgradeOptions"] = {
            "gatewayClassName": GATEWAY_CLASS_NAME,
            **{k: int(v) for k, v in sorted(options.items())},
        }
    return strategy


def rayservice(
    cluster: Any,
    details: Any,
    *,
    image: str | None = None,
    queue_mode: str = "builtin",
    kai_enabled: bool = False,
) -> Manifest:
    """The ``ray.io/v1`` RayService of one service request (saved or not). In Kueue mode it
    joins the tenant's LocalQueue as an elastic job (Kueue's RayService integration holds
    it through ``rayClusterConfig.suspend`` until its Workload is admitted); a fractional
    dev service (KAI) carries the tenant's KAI queue."""
    chosen = resolve_image(cluster, image)
    object_labels = dict(lbl.cluster_labels(cluster))
    if queue_mode == "kueue":
        object_labels[lbl.KUEUE_QUEUE_NAME] = LOCAL_QUEUE_NAME
        object_labels[lbl.KUEUE_PRIORITY_CLASS] = priority_classes.kueue_label(cluster)
    ray_cluster = raycluster(cluster, image=chosen, queue_mode=queue_mode, kai_enabled=kai_enabled)
    kai_queue = ray_cluster["metadata"]["labels"].get(lbl.KAI_QUEUE)
    if kai_queue:
        # A fractional service's pods carry KAI's scheduler and queue as a cluster's do;
        # KubeRay copies the RayService's labels onto its RayClusters, which then carry
        # the queue as a cluster's RayCluster does (KAI's pod grouper reads the top owner).
        object_labels[lbl.KAI_QUEUE] = kai_queue
        object_labels.update(priority_classes.kai_labels(cluster))
    if queue_mode != "kueue":
        _guaranteed_size(ray_cluster["spec"], cluster, details)
    spec: Manifest = {
        "serveConfigV2": str(details.serve_config),
        "upgradeStrategy": upgrade_strategy(details),
        "rayClusterConfig": _with_serve_port(ray_cluster["spec"]),
    }
    obj = request_object("ray.io/v1", "RayService", cluster, object_labels, spec)
    # KAI's pod grouper reads a gang's topology ask from its top owner: the RayService.
    notes = dict(ray_cluster["metadata"].get("annotations") or {})
    if queue_mode == "kueue":
        notes[ELASTIC_JOB] = "true"
        _elastic(spec["rayClusterConfig"])
    if notes:
        obj["metadata"]["annotations"] = notes
    return obj


def manifests(cluster: Any, **options: Any) -> list[Manifest]:
    """What is applied for one service: the claim templates of its Ray clusters (DRA
    flavors; every cluster an upgrade brings up shares them), then its RayService (a
    candidate's details are unsaved; ``options`` as for :func:`rayservice`)."""
    details = getattr(cluster, "_service_details", None) or cluster.service
    return [*claim_templates(cluster, **options), rayservice(cluster, details, **options)]


def _templates(config: Manifest) -> dict[str, Manifest]:
    """The pod templates of a RayCluster config by group (``head`` for the head)."""
    found = {"head": (config.get("headGroupSpec") or {}).get("template") or {}}
    for group in config.get("workerGroupSpecs") or []:
        found[f"worker:{group.get('groupName', '')}"] = group.get("template") or {}
    return found


def keep_admission(obj: Manifest, live: Manifest | None) -> None:
    """Keep on ``obj`` what Kueue wrote into the live RayService's pod templates when it
    admitted it (its ``kueue.x-k8s.io/`` labels and annotations, the flavor's node
    labels). Kueue writes them once, on admission; an apply that dropped them would leave
    the pods of KubeRay's next cluster (an upgrade's) without the slice name Kueue finds
    them by, gated for ever, and off the flavor's nodes."""
    config = ((live or {}).get("spec") or {}).get("rayClusterConfig") or {}
    if not config or config.get("suspend") is True:
        return
    theirs = _templates(config)
    for name, ours in _templates(obj["spec"]["rayClusterConfig"]).items():
        admitted = theirs.get(name)
        if not admitted or not ours:
            continue
        for part in ("labels", "annotations"):
            kept = {
                k: v
                for k, v in ((admitted.get("metadata") or {}).get(part) or {}).items()
                if k.startswith("kueue.x-k8s.io/")
            }
            if kept:
                meta = ours.setdefault("metadata", {})
                meta[part] = {**kept, **(meta.get(part) or {})}
        selector = (admitted.get("spec") or {}).get("nodeSelector") or {}
        if selector:
            spec = ours.setdefault("spec", {})
            spec["nodeSelector"] = {**selector, **(spec.get("nodeSelector") or {})}
