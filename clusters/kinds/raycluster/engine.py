"""How an interactive cluster's row and its RayCluster are kept in step: converging the
row's state into Kubernetes, and folding the RayCluster and its pods back into the row.

Every step is idempotent: applies are server-side applies of deterministic objects,
deletes of absent objects succeed, and state moves are conditional UPDATEs. What differs
between queueing modes is asked of the queue backend (:mod:`clusters.queue.interface`).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction

from clusters.domain.states import HOLDS_QUOTA, LIVE, State
from clusters.engine import pod_trouble
from clusters.engine.deletion import delete_claim_templates, finish_deletion
from clusters.engine.pass_state import Fold, Key, Seen
from clusters.engine.readiness import is_ready, waiting_reason
from clusters.kinds.raycluster.manifests import manifests
from clusters.kinds.raycluster.states import WANTS_RAYCLUSTER
from clusters.kube import ssh
from clusters.kube.bundles import BatchBundles, apply_into
from clusters.kube.gateway import Gateway
from clusters.models import ClusterEvent, ClusterRequest
from clusters.queue.backends import manifest_options, queue_backend
from clusters.queue.interface import QueueBackend
from clusters.rows import lifecycle
from clusters.rows.transitions import note, transition
from tenants.selectors import ssh_keys_for_cluster

__all__ = ["manifests"]

RAYCLUSTER = ("ray.io/v1", "RayCluster")


def cluster_objects(cluster: ClusterRequest) -> list[dict[str, Any]]:
    """The objects applied for one cluster, with ``spec.suspend`` following the row
    (unless the queue backend suspends RayClusters itself)."""
    objects = manifests(cluster, **manifest_options())
    if cluster.ssh:
        # The keys as they are now: provisioning (and a resume) applies them again.
        keys = ssh_keys_for_cluster(tenant=cluster.tenant, owner=cluster.owner)
        objects.insert(0, ssh.keys_secret(cluster, keys))
    if not queue_backend().provisions_queued:
        for obj in objects:
            if obj.get("kind") == "RayCluster":
                obj["spec"]["suspend"] = cluster.state == State.SUSPENDED
    return objects


def apply(cluster: ClusterRequest, gw: Gateway, *, bundles: BatchBundles | None = None) -> None:
    """Apply the tenant bundle and the cluster's objects (idempotent)."""
    apply_into(cluster.tenant, gw, cluster_objects(cluster), bundles=bundles)


def delete_object(gw: Gateway, namespace: str, name: str) -> None:
    """Delete a RayCluster (its pods follow; absent is fine): deploy's RBAC test reads this call."""
    gw.delete("ray.io/v1", "RayCluster", name, namespace)
    gw.delete("v1", "Secret", ssh.secret_name(name), namespace)
    delete_claim_templates(gw, namespace, name)


def gone(cluster: ClusterRequest, gw: Gateway) -> bool:
    """True when neither the RayCluster nor any of its pods exist any more."""
    if gw.get(*RAYCLUSTER, cluster.name, cluster.namespace) is not None:
        return False
    pods = gw.list(
        "v1", "Pod", namespace=cluster.namespace, label_selector=f"ray.io/cluster={cluster.name}"
    )
    return not pods


def converge_deletion(cluster: ClusterRequest, gw: Gateway) -> None:
    """Delete the RayCluster, and mark the row deleted once nothing of it is left."""
    delete_object(gw, cluster.namespace, cluster.name)
    if gone(cluster, gw):
        finish_deletion(cluster)


def wants_provisioning(cluster: ClusterRequest) -> bool:
    """Whether the row's state asks anything of Kubernetes now."""
    if cluster.state in (State.DELETED, State.FAILED):
        return False
    return cluster.state != State.QUEUED or queue_backend().provisions_queued


def converge(
    cluster: ClusterRequest,
    gw: Gateway,
    *,
    bundles: BatchBundles | None = None,
    finish_deletion: bool = True,
) -> None:
    """Do the one thing the row's state asks of Kubernetes, past admission (see the
    registry's :class:`~clusters.domain.workload_kinds.Behaviour`)."""
    backend = queue_backend()
    state = cluster.state
    if state == State.QUEUED:
        if backend.provisions_queued:
            # The backend holds it suspended until admitted.
            apply(cluster, gw, bundles=bundles)
    elif state == State.SUSPENDED and backend.suspend_deletes:
        delete_object(gw, cluster.namespace, cluster.name)
    elif state in (State.PROVISIONING, State.READY, State.SUSPENDED):
        apply(cluster, gw, bundles=bundles)
    elif state == State.DELETING:
        if finish_deletion:
            converge_deletion(cluster, gw)
        else:
            delete_object(gw, cluster.namespace, cluster.name)


def wants_object(state: str, backend: QueueBackend) -> bool:
    """Whether a row in ``state`` wants its RayCluster to exist (others' are orphans)."""
    if state == State.QUEUED:
        return backend.provisions_queued
    if state == State.SUSPENDED:
        return not backend.suspend_deletes
    return state in WANTS_RAYCLUSTER


def needs_bundle(state: str) -> bool:
    """Whether a row in ``state`` needs its tenant's namespace bundle."""
    return state in WANTS_RAYCLUSTER


def orphan(obj: dict[str, Any]) -> bool:
    """Whether a managed RayCluster no row wants is ours (a RayJob's goes with its owner)."""
    return not obj["metadata"].get("ownerReferences")


def deadline_seconds(cluster: ClusterRequest) -> int | None:
    """A cluster has no deadline of its own (its TTL is ``expires_at``)."""
    return None


def objects_stamp(seen: Seen, key: Key, pk: int) -> tuple[Any, ...]:
    """What a cluster row's fold reads, by resourceVersion: its RayCluster, its pods and
    their FailedScheduling events (every write gives an object a new resourceVersion)."""
    rc = seen.object("RayCluster", key)
    pods = seen.pods.get(key, ())
    events = seen.events
    return (
        rc["metadata"]["resourceVersion"] if rc is not None else None,
        tuple(p["metadata"].get("resourceVersion") for p in pods),
        tuple(
            events[uid]["metadata"].get("resourceVersion")
            for p in pods
            if (uid := p["metadata"].get("uid", "")) in events
        ),
    )


def fold(cluster: ClusterRequest, fold: Fold) -> None:
    """Fold one row's RayCluster and pods into it, or repair them."""
    rc = fold.seen.object("RayCluster", fold.key)
    state = cluster.state
    gw, report = fold.gw, fold.report
    if state == State.QUEUED and fold.backend.provisions_queued:
        # The backend queues the RayCluster itself (held suspended until admitted).
        if rc is None:
            apply(cluster, gw)
        else:
            fold.view.fold_waiting(cluster)
        return
    # A MultiKueue copy is never deleted here: MultiKueue removes it once the manager's
    # original is gone (deleting it first would only make Kueue dispatch it again).
    copy = fold.view.dispatched(cluster)
    if state == State.SUSPENDED and fold.backend.suspend_deletes:
        if rc is not None and not rc["metadata"].get("deletionTimestamp") and not copy:
            delete_object(gw, cluster.namespace, cluster.name)
        return
    # A MultiKueue copy goes when the manager's Workload is evicted: the verdict is read
    # even once it is gone.
    if state in HOLDS_QUOTA and (rc is not None or copy) and fold.view.fold_eviction(cluster):
        report.evicted.append(cluster.pk)
        return
    if state in LIVE and cluster.expires_at and cluster.expires_at <= fold.now:
        lifecycle.request_deletion(cluster, reason="expired")
        report.expired.append(cluster.pk)
        return
    pods = fold.seen.pods.get(fold.key, [])
    if state == State.DELETING:
        if rc is not None and not rc["metadata"].get("deletionTimestamp") and not copy:
            delete_object(gw, cluster.namespace, cluster.name)
        elif rc is None and not pods:
            # Moved with the others at the end of the pass (finish_deletion in bulk).
            report.batch.to_delete[cluster.deletion_reason or "deleted"].append(cluster)
        return
    if state in (State.PROVISIONING, State.READY, State.SUSPENDED):
        _warn_of_expiry(cluster, fold.now)
        _fold_running(cluster, rc, pods, fold)


def _fold_running(
    cluster: ClusterRequest, rc: dict[str, Any] | None, pods: list[dict[str, Any]], fold: Fold
) -> None:
    """A provisioning, ready or suspended row: recreate what vanished, fold readiness."""
    state = cluster.state
    report = fold.report
    if rc is None:
        if fold.view.dispatched(cluster):
            return  # MultiKueue writes the copy here (again), from the manager's original
        apply(cluster, fold.gw)
        report.recreated.append(cluster.pk)
        if state == State.READY:
            transition(
                cluster,
                State.PROVISIONING,
                reason="recreated",
                message="its RayCluster vanished and was recreated",
                ready_at=None,
            )
        return
    if state == State.SUSPENDED:
        if not (rc.get("spec") or {}).get("suspend"):
            apply(cluster, fold.gw)
        return
    ready = is_ready(cluster, rc, pods)
    if ready and state == State.PROVISIONING:
        report.batch.to_ready.append(cluster)
    elif not ready:
        reason = waiting_reason(cluster, pods, fold.seen.events)
        if state == State.READY:
            transition(
                cluster, State.PROVISIONING, reason="degraded", message=reason, ready_at=None
            )
        elif reason != cluster.state_reason:
            report.batch.reasons[(state, reason)].append(cluster.pk)
        _tell_of_trouble(cluster, reason)


def _tell_of_trouble(cluster: ClusterRequest, reason: str) -> None:
    """Tell the owner once when the cluster's pods start failing (not at each restart):
    the page shows it as the reason, and every warning the page shows is also sent."""
    if not reason.startswith(pod_trouble.PREFIX) or cluster.state_reason.startswith(
        pod_trouble.PREFIX
    ):
        return
    events = ClusterEvent.objects.filter(cluster_id=cluster.pk)
    ready = events.filter(to_state=State.READY).order_by("-id").values_list("id", flat=True)
    since = ready.first() or 0
    if not events.filter(reason="pods_failing", id__gt=since).exists():
        note(cluster, reason="pods_failing", message=reason)


def _warn_of_expiry(cluster: ClusterRequest, now: Any) -> None:
    """Tell the owner, once, that the cluster expires soon and can be extended (USERS 1)."""
    warning = timedelta(minutes=settings.EXPIRY_WARNING_MINUTES)
    if not cluster.expires_at or cluster.expiry_warned_at or cluster.expires_at - now > warning:
        return
    with transaction.atomic():  # the mark and its event are seen together
        claimed = ClusterRequest.objects.filter(
            pk=cluster.pk, expiry_warned_at__isnull=True
        ).update(expiry_warned_at=now)
        if claimed:
            minutes = max(int((cluster.expires_at - now).total_seconds() // 60), 0)
            note(
                cluster,
                reason="expiry_warning",
                message=f"expires at {cluster.expires_at:%H:%M} UTC (in {minutes} min) and its "
                "GPUs will be released; extend it to keep it",
            )
