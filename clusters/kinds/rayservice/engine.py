"""How a service's row and its RayService are kept in step: apply the RayService as
the row asks, and fold what KubeRay reports of it back into the row.

A service moves ``queued -> admitted -> starting -> ready`` (``states.py``). Its
RayService is applied once it is admitted; KubeRay brings up its RayCluster and deploys
the Serve config. The row is ``ready`` while the RayService's ``Ready`` condition is
true, and keeps the applications' statuses, the active and pending clusters and whether
an upgrade is in progress on its :class:`~clusters.models.Service` details.
"""

from __future__ import annotations

from typing import Any

from clusters.domain.states import State
from clusters.engine.deletion import delete_claim_templates, pods_of
from clusters.engine.deletion import finish_deletion as _finish_deletion
from clusters.engine.pass_state import Fold, Key, Seen
from clusters.kinds.raycluster.manifests import claim_templates
from clusters.kinds.rayservice import growth, upgrade
from clusters.kinds.rayservice.manifests import keep_admission, manifests, rayservice
from clusters.kinds.rayservice.states import WANTS_RAYSERVICE
from clusters.kube.bundles import BatchBundles, apply_into
from clusters.kube.gateway import Gateway
from clusters.models import ClusterRequest, Service
from clusters.queue.backends import manifest_options, queue_backend
from clusters.queue.interface import QueueBackend
from clusters.rows.transitions import transition

__all__ = ["manifests"]

RAYSERVICE = ("ray.io/v1", "RayService")
TRAFFIC_KEYS = ("targetCapacity", "trafficRoutedPercent")


def service_of(cluster: ClusterRequest) -> Service:
    """The service details of a service request (read once per row object)."""
    return cluster.service


def apply(cluster: ClusterRequest, gw: Gateway, *, bundles: BatchBundles | None = None) -> None:
    """Apply the tenant bundle and the service's RayService (idempotent); under a backend
    that queues the RayService itself (Kueue), keeping what it wrote on admission."""
    options = manifest_options()
    obj = rayservice(cluster, service_of(cluster), **options)
    if queue_backend().provisions_queued:
        keep_admission(obj, gw.get(*RAYSERVICE, cluster.name, cluster.namespace))
    apply_into(cluster.tenant, gw, [*claim_templates(cluster, **options), obj], bundles=bundles)


def delete_object(gw: Gateway, namespace: str, name: str) -> None:
    """Delete a RayService (KubeRay deletes its RayClusters; their pods follow)."""
    gw.delete("ray.io/v1", "RayService", name, namespace)
    delete_claim_templates(gw, namespace, name)


def converge(
    cluster: ClusterRequest,
    gw: Gateway,
    *,
    bundles: BatchBundles | None = None,
    finish_deletion: bool = True,
) -> None:
    """Do what the row's state asks of Kubernetes past admission (idempotent)."""
    state = cluster.state
    if state == State.QUEUED and queue_backend().provisions_queued:
        apply(cluster, gw, bundles=bundles)  # Kueue holds it until it admits its Workload
    elif state in (State.ADMITTED, State.STARTING, State.READY):
        upgrade.surge_step(cluster)  # an admitted upgrade is written on the row first
        apply(cluster, gw, bundles=bundles)
        growth.write_cap(cluster, service_of(cluster), gw)
    elif state in (State.DELETING, State.FAILED, State.SUSPENDED):
        delete_object(gw, cluster.namespace, cluster.name)
        gone = gw.get(*RAYSERVICE, cluster.name, cluster.namespace) is None
        if state == State.DELETING and finish_deletion and gone and not pods_of(gw, cluster):
            _finish_deletion(cluster)


def wants_provisioning(cluster: ClusterRequest) -> bool:
    """Past the queue, every state but ``deleted`` asks something of Kubernetes; so does
    a queued service under a backend that queues the object itself (Kueue)."""
    if cluster.state == State.QUEUED:
        return queue_backend().provisions_queued
    return cluster.state != State.DELETED


def wants_object(state: str, backend: QueueBackend) -> bool:
    """Whether a row in ``state`` wants its RayService (others' are orphans)."""
    if state == State.QUEUED:
        return backend.provisions_queued
    return state in WANTS_RAYSERVICE


def needs_bundle(state: str) -> bool:
    """Whether a service in ``state`` needs its tenant's namespace bundle."""
    return state in WANTS_RAYSERVICE


def orphan(obj: dict[str, Any]) -> bool:
    """A managed RayService no row wants is always ours to delete."""
    return True


def deadline_seconds(cluster: ClusterRequest) -> int | None:
    """A service runs until it is deleted."""
    return None


def objects_stamp(seen: Seen, key: Key, pk: int) -> tuple[Any, ...]:
    """What a service's fold reads, by resourceVersion: its RayService and its pods."""
    rs = seen.object("RayService", key)
    return (
        rs["metadata"]["resourceVersion"] if rs is not None else None,
        tuple(p["metadata"].get("resourceVersion") for p in seen.pods_by_id.get(pk, ())),
    )


def condition(status: dict[str, Any], kind: str) -> dict[str, Any]:
    """The RayService's condition of type ``kind`` (empty when it has none yet)."""
    return next((c for c in status.get("conditions") or [] if c.get("type") == kind), {})


def applications(side: dict[str, Any]) -> dict[str, Any]:
    """One side's (active or pending) applications: status, message, deployments."""
    found: dict[str, Any] = {}
    for name, app in sorted((side.get("applicationStatuses") or {}).items()):
        deployments = app.get("serveDeploymentStatuses") or {}
        found[name] = {
            "status": str(app.get("status") or ""),
            "message": str(app.get("message") or ""),
            "deployments": {
                d: {"status": str(s.get("status") or ""), "message": str(s.get("message") or "")}
                for d, s in sorted(deployments.items())
            },
        }
    return found


def traffic(active: dict[str, Any], pending: dict[str, Any]) -> dict[str, Any]:
    """An incremental upgrade's split while a pending cluster is reported: each side's
    ``targetCapacity`` and ``trafficRoutedPercent`` (KubeRay writes them for that strategy
    only; empty otherwise, and once the pending cluster is promoted)."""
    if not pending.get("rayClusterName"):
        return {}
    if not any(k in side for side in (active, pending) for k in TRAFFIC_KEYS):
        return {}
    defaults = {"active": 100, "pending": 0}  # KubeRay's reading of an unset side
    return {
        name: {
            "cluster": str(side.get("rayClusterName") or ""),
            "target_capacity": int(side.get("targetCapacity", defaults[name])),
            "traffic_routed_percent": int(side.get("trafficRoutedPercent", defaults[name])),
        }
        for name, side in (("active", active), ("pending", pending))
    }


def record_status(cluster: ClusterRequest, rs: dict[str, Any]) -> None:
    """Copy what KubeRay reports onto the service's details when it changed."""
    status = rs.get("status") or {}
    active = status.get("activeServiceStatus") or {}
    pending = status.get("pendingServiceStatus") or {}
    fields = {
        "applications": applications(active) or applications(pending),
        "active_cluster": str(active.get("rayClusterName") or ""),
        "pending_cluster": str(pending.get("rayClusterName") or ""),
        "upgrading": condition(status, "UpgradeInProgress").get("status") == "True",
        "traffic": traffic(active, pending),
        "serve_endpoints": int(status.get("numServeEndpoints") or 0),
    }
    details = service_of(cluster)
    changed = {k: v for k, v in fields.items() if getattr(details, k) != v}
    if changed:
        Service.objects.filter(pk=cluster.pk).update(**changed)
        for key, value in changed.items():
            setattr(details, key, value)


def fold(cluster: ClusterRequest, fold: Fold) -> None:
    """Fold one service's RayService into its row, or repair it."""
    rs = fold.seen.object("RayService", fold.key)
    state = cluster.state
    gw, report = fold.gw, fold.report
    if state == State.DELETING:
        _fold_deletion(cluster, rs, fold)
        return
    if _fold_queue(cluster, rs, fold):
        return
    if rs is None:
        if fold.view.dispatched(cluster):
            return  # MultiKueue writes the copy here (again), from the manager's original
        apply(cluster, gw)
        report.recreated.append(cluster.pk)
        if state == State.READY:
            transition(
                cluster,
                State.STARTING,
                reason="recreated",
                message="its RayService vanished and was recreated",
                ready_at=None,
            )
        return
    record_status(cluster, rs)
    pods = fold.seen.pods_by_id.get(cluster.pk, [])
    upgrade.surge_step(cluster, pods)
    growth.growth_step(cluster, service_of(cluster), pods)
    growth.write_cap(cluster, service_of(cluster), gw)
    growth.write_pending_cap(cluster, service_of(cluster), pods, gw)
    ready = condition(rs.get("status") or {}, "Ready")
    if ready.get("reason") == "ValidationFailed":
        transition(
            cluster,
            State.FAILED,
            reason="invalid",
            message=str(ready.get("message") or "KubeRay refused the RayService")[:500],
            last_error=str(ready.get("message") or ""),
        )
    elif ready.get("status") == "True":
        if state == State.STARTING:
            report.batch.to_ready.append(cluster)
    elif state == State.READY:
        transition(
            cluster,
            State.STARTING,
            reason="degraded",
            message=str(ready.get("message") or "no Serve endpoint is ready")[:500],
            ready_at=None,
        )
    else:
        reason = _waiting(cluster)
        if reason != cluster.state_reason:
            report.batch.reasons[(state, reason)].append(cluster.pk)


def _fold_deletion(cluster: ClusterRequest, rs: dict[str, Any] | None, fold: Fold) -> None:
    """A deleting service: its RayService deleted, then the row finished once it and its
    pods are gone. A MultiKueue copy is never deleted here: MultiKueue removes it once the
    manager's original is gone (deleting it first would only make Kueue dispatch it
    again)."""
    if rs is not None and not rs["metadata"].get("deletionTimestamp"):
        if not fold.view.dispatched(cluster):
            delete_object(fold.gw, cluster.namespace, cluster.name)
    elif rs is None and not fold.seen.pods_by_id.get(cluster.pk):
        fold.report.batch.to_delete[cluster.deletion_reason or "deleted"].append(cluster)


def _fold_queue(cluster: ClusterRequest, rs: dict[str, Any] | None, fold: Fold) -> bool:
    """The queue's part of a service's fold; True when it settles this pass. Under a
    backend that queues the RayService itself (Kueue), a queued service's RayService is
    (re)written or Kueue's verdict folded (its position and reason, or its admission), and
    a serving one that Kueue evicted is put back in line with its GPUs released. Any other
    queued or admitted row is the queue's and the provision pass's to move. On a
    MultiKueue worker the verdicts are the manager's Workload's (the view reads them)."""
    if cluster.state == State.QUEUED and fold.backend.provisions_queued:
        if rs is None:
            apply(cluster, fold.gw)
        else:
            fold.view.fold_waiting(cluster)
        return True
    if cluster.state not in (State.STARTING, State.READY):
        return True
    # A MultiKueue copy goes when the manager's Workload is evicted: the verdict is read
    # even once it is gone.
    if (rs is not None or fold.view.dispatched(cluster)) and fold.view.fold_eviction(cluster):
        fold.report.evicted.append(cluster.pk)
        return True
    return False


def _waiting(cluster: ClusterRequest) -> str:
    """What a starting service waits for, from its applications' statuses."""
    apps = service_of(cluster).applications
    if not apps:
        return "waiting for its Ray cluster's head"
    waiting = sorted(name for name, app in apps.items() if app["status"] != "RUNNING")
    return "waiting for applications: " + ", ".join(waiting) if waiting else "waiting for endpoints"
