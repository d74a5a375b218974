"""A service beyond its guaranteed size: the growth it asks for and the size it may run at.

An autoscaling service is charged at ``min_workers`` (the kind grows,
:attr:`~clusters.domain.workload_kinds.Kind.grows`) and its RayService's worker group is
written at that size; the Ray autoscaler may grow the active RayCluster only up to the
``maxReplicas`` this module writes on it: the guaranteed size plus the growth admitted
(:mod:`clusters.rows.growths`). Ray Serve says it wants more when replicas wait to be
scheduled (its deployments' "taken more than 30s to be scheduled" message, with the
resources each needs) while every worker allowed is up: that is asked for as a growth.
A growth is given back once Serve wants nothing more and the cluster is back at its
guaranteed size; a reclaim takes it back at once (the cap is lowered, never below
``min_workers``, and the autoscaler removes the workers above it).
"""

from __future__ import annotations

import ast
import math
import re
from decimal import Decimal
from typing import Any

from clusters.domain import shapes
from clusters.kinds.rayservice.spec import INCREMENTAL, surge_workers
from clusters.kube.errors import KubeError
from clusters.kube.gateway import Gateway
from clusters.models import ClusterRequest, Growth, Service
from clusters.queue.backends import queue_backend
from clusters.rows import growths
from clusters.rows.spec import ClusterSpec

# Ray Serve's words for replicas no node has room for (deployment_state.py).
UNSCHEDULED = re.compile(r"has (\d+) replicas? that ha(?:ve|s) taken more than \d+s to be sched")
NEEDS = re.compile(r"Resources required for each replica: (\{[^}]*\})")


def bounds(cluster: ClusterRequest) -> tuple[int, int] | None:
    """(guaranteed, largest) workers of a service that may grow; ``None`` for one that
    does not (fixed size, or Kueue decides its size)."""
    _, low, high = shapes.replica_bounds(
        kind=str(cluster.kind),
        workers=int(cluster.workers),
        min_workers=cluster.min_workers,
        max_workers=cluster.max_workers,
    )
    if low == high or queue_backend().fixed_size_only:
        return None
    return low, high


def growth_of(cluster: ClusterRequest) -> Growth | None:
    """The service's growth, read now (``None``: none)."""
    return Growth.objects.filter(pk=cluster.pk).select_related("flavor").first()


def cap(cluster: ClusterRequest, growth: Growth | None) -> int:
    """The workers the service may run now: its guaranteed size plus an admitted growth."""
    found = bounds(cluster)
    low = found[0] if found else int(cluster.workers)
    return low + (growth.workers if growth is not None and growth.admitted_at else 0)


def unscheduled_gpus(applications: dict[str, Any]) -> Decimal:
    """The GPUs of the replicas Serve waits to schedule, from its deployments' messages."""
    total = Decimal(0)
    for app in applications.values():
        for deployment in (app.get("deployments") or {}).values():
            message = str(deployment.get("message") or "")
            count, needs = UNSCHEDULED.search(message), NEEDS.search(message)
            if count is None or needs is None:
                continue
            try:
                each = ast.literal_eval(needs.group(1))
                gpus = Decimal(str(each.get("GPU", 0))) if isinstance(each, dict) else 0
            except (ValueError, SyntaxError, ArithmeticError):
                continue
            total += int(count.group(1)) * gpus
    return total


def _workers(details: Service, pods: list[dict[str, Any]]) -> tuple[int, bool]:
    """The active cluster's worker pods: how many, and whether all are ready."""
    count, ready = 0, True
    for pod in pods:
        meta = pod.get("metadata") or {}
        labels = meta.get("labels") or {}
        if labels.get("ray.io/cluster") != details.active_cluster or meta.get("deletionTimestamp"):
            continue
        if labels.get("ray.io/node-type") != "worker":
            continue
        count += 1
        conditions = (pod.get("status") or {}).get("conditions") or []
        ready = ready and any(
            c.get("type") == "Ready" and c.get("status") == "True" for c in conditions
        )
    return count, ready


def growth_step(cluster: ClusterRequest, details: Service, pods: list[dict[str, Any]]) -> None:
    """Ask for the growth Serve needs, or give back what it no longer needs (the fold)."""
    found = bounds(cluster)
    if found is None or not details.active_cluster:
        return
    low, high = found
    growth = growth_of(cluster)
    granted = growth.workers if growth is not None and growth.admitted_at else 0
    wanted_gpus = unscheduled_gpus(details.applications)
    workers, all_ready = _workers(details, pods)
    if wanted_gpus <= 0:
        if growth is not None and growth.admitted_at is None:
            growths.forget_waiting(cluster)
        elif (
            growth is not None
            and granted
            and workers <= low
            and details.worker_cap == low + granted
        ):
            growths.give_back(
                cluster,
                reason="growth_released",
                message=f"Serve needs no more than its guaranteed {low} workers; "
                f"{growths.words(growth)} given back",
            )
        return
    if granted or workers < cap(cluster, growth) or not all_ready:
        return  # what it may run is not all up yet (or it grows once at a time)
    spec = ClusterSpec.of(cluster)
    per_worker = spec.worker_gpus()
    more = min(high - low, math.ceil(wanted_gpus / per_worker))
    worker = shapes.worker_resources(
        kind=spec.kind, flavor=shapes.flavor_spec(spec.flavor), gpu_fraction=spec.gpu_fraction
    )
    growths.record(
        cluster,
        workers=more,
        gpus=per_worker * more,
        cpu=worker.cpu * more,
        memory_gib=worker.memory_gib * more,
    )


def _of_cluster(name: str, pods: list[dict[str, Any]]) -> int:
    """The worker pods of RayCluster ``name`` still there (terminating ones count: they
    hold their GPUs until they are gone)."""
    return sum(
        1
        for p in pods
        if ((p.get("metadata") or {}).get("labels") or {}).get("ray.io/cluster") == name
        and ((p.get("metadata") or {}).get("labels") or {}).get("ray.io/node-type") == "worker"
    )


def pending_cap(cluster: ClusterRequest, details: Service, pods: list[dict[str, Any]]) -> int:
    """What an incremental upgrade's new cluster may run: the surge admitted plus the
    guaranteed workers the old one has given back as KubeRay lowered its capacity."""
    found = bounds(cluster)
    low = found[0] if found else int(cluster.workers)
    surge = surge_workers(str(details.upgrade_type), details.upgrade_options or {}, low)
    return surge + max(0, low - _of_cluster(details.active_cluster, pods))


def write_pending_cap(
    cluster: ClusterRequest, details: Service, pods: list[dict[str, Any]], gw: Gateway
) -> None:
    """Hold an incremental upgrade's pending RayCluster at :func:`pending_cap` (its worker
    group's ``maxReplicas``, its ``minReplicas`` no higher), so that both clusters
    together never run more than the guaranteed size plus the surge. KubeRay compares the
    hash it annotated, not the live spec, so it does not bring a cluster up again."""
    if bounds(cluster) is None or not (details.active_cluster and details.pending_cluster):
        return
    if details.upgrade_type != INCREMENTAL:
        return  # a NewCluster upgrade's new cluster is charged whole
    want = pending_cap(cluster, details, pods)
    rc = gw.get("ray.io/v1", "RayCluster", details.pending_cluster, cluster.namespace)
    if rc is None:
        return
    groups = [dict(g) for g in (rc.get("spec") or {}).get("workerGroupSpecs") or []]
    if all(g.get("maxReplicas") == want and int(g.get("minReplicas") or 0) <= want for g in groups):
        return
    for group in groups:
        group["minReplicas"] = min(int(group.get("minReplicas") or 0), want)
    _write_groups(gw, rc, groups, want)


def _write_groups(gw: Gateway, rc: dict[str, Any], groups: list[dict[str, Any]], want: int) -> bool:
    """Write ``groups`` with ``maxReplicas`` ``want`` on the RayCluster ``rc`` as read
    (its resourceVersion: a conflict with the autoscaler's own write is tried again on
    the next pass); whether it was written."""
    for group in groups:
        group["maxReplicas"] = want
    meta = rc["metadata"]
    patch = {
        "metadata": {"resourceVersion": meta["resourceVersion"]},
        "spec": {"workerGroupSpecs": groups},
    }
    try:
        gw.merge_patch("ray.io/v1", "RayCluster", meta["name"], patch, meta["namespace"])
    except KubeError:
        return False
    return True


def write_cap(cluster: ClusterRequest, details: Service, gw: Gateway) -> None:
    """Hold the active RayCluster's worker group at what the service may run (its
    ``maxReplicas``), when that changed or the active cluster did. A conflict with the
    autoscaler's own write is tried again on the next pass."""
    if bounds(cluster) is None or not details.active_cluster:
        return
    want = cap(cluster, growth_of(cluster))
    if (details.capped_cluster, details.worker_cap) == (details.active_cluster, want):
        return
    rc = gw.get("ray.io/v1", "RayCluster", details.active_cluster, cluster.namespace)
    if rc is None:
        return
    groups = [dict(g) for g in (rc.get("spec") or {}).get("workerGroupSpecs") or []]
    if not _write_groups(gw, rc, groups, want):
        return
    Service.objects.filter(pk=cluster.pk).update(
        worker_cap=want, capped_cluster=details.active_cluster
    )
    details.worker_cap, details.capped_cluster = want, details.active_cluster
