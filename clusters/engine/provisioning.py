"""Provisioning steps: make Kubernetes match one cluster request's row.

:func:`converge` looks at the row's state and does the one idempotent thing that state
asks for — apply the tenant bundle and the RayCluster, suspend it, or delete it and
finish the deletion once its pods are gone. It is safe to run twice, in parallel, or
after a crash at any point: applies are server-side applies of deterministic objects,
deletes of absent objects succeed, and state moves are conditional UPDATEs. What differs
between queueing modes is asked of the queue backend (:mod:`clusters.queue.interface`).
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from clusters.domain.states import State
from clusters.engine import jobs
from clusters.engine.deletion import converge_deletion, delete_raycluster
from clusters.kube.bundles import BatchBundles, apply_into
from clusters.kube.gateway import Gateway, get_gateway
from clusters.kube.manifests import cluster_manifests
from clusters.models import ClusterRequest
from clusters.queue.backends import manifest_options, queue_backend
from clusters.rows.transitions import transition_many


def cluster_objects(cluster: ClusterRequest) -> list[dict[str, Any]]:
    """The objects applied for one cluster, with ``spec.suspend`` following the row
    (unless the queue backend suspends RayClusters itself)."""
    objects = cluster_manifests(cluster, **manifest_options())
    if not queue_backend().provisions_queued:
        for obj in objects:
            if obj.get("kind") == "RayCluster":
                obj["spec"]["suspend"] = cluster.state == State.SUSPENDED
    return objects


def apply_cluster(
    cluster: ClusterRequest, gw: Gateway, *, bundles: BatchBundles | None = None
) -> None:
    """Apply the tenant bundle and the cluster's objects (idempotent).

    ``bundles``: a batch passes the same :class:`BatchBundles` for all its rows, so each
    tenant's bundle is rendered and checked once, from quota rows read in one query."""
    if cluster.is_job:
        jobs.apply_job(cluster, gw, bundles=bundles)
        return
    apply_into(cluster.tenant, gw, cluster_objects(cluster), bundles=bundles)


def take_requested(limit: int) -> list[int]:
    """Take up to ``limit`` rows marked for a provisioning step
    (``provision_requested_at``), oldest mark first, and clear their marks; returns
    their ids.

    The marks are cleared before the rows are converged, as a message is consumed
    before its task runs: two passes at once take different rows (rows another pass is
    taking are skipped, not waited for), and a pass that dies after this leaves its
    rows to the reconciler and the sweeper, as a lost message did."""
    with transaction.atomic():
        ids = list(
            ClusterRequest.objects.unscoped()
            .filter(provision_requested_at__isnull=False)
            .order_by("provision_requested_at", "pk")
            .select_for_update(skip_locked=True)
            .values_list("pk", flat=True)[:limit]
        )
        if ids:
            ClusterRequest.objects.unscoped().filter(pk__in=ids).update(provision_requested_at=None)
    return ids


def any_admitted() -> bool:
    """Whether rows are admitted and not yet applied (a batch still at work)."""
    return ClusterRequest.objects.unscoped().filter(state=State.ADMITTED).exists()


def wants_provisioning(cluster: ClusterRequest) -> bool:
    """Whether the row's state asks anything of Kubernetes now."""
    if cluster.is_job:
        # A job's RayJob is written while it waits; a finished one may still have pods
        # to see off.
        return cluster.state != State.DELETED
    if cluster.state in (State.DELETED, State.FAILED):
        return False
    return cluster.state != State.QUEUED or queue_backend().provisions_queued


def converge(
    cluster: ClusterRequest,
    gw: Gateway | None = None,
    *,
    bundles: BatchBundles | None = None,
    applied: list[ClusterRequest] | None = None,
    started: list[ClusterRequest] | None = None,
    finish_deletion: bool = True,
) -> None:
    """Do what the row's state asks of Kubernetes; see the module docstring. ``bundles``
    as for :func:`apply_cluster`. ``applied``: an admitted cluster whose objects were
    applied is put there instead of being moved to ``provisioning`` at once, so that a
    batch moves all of its rows together (:func:`mark_applied`); ``started`` is the
    same for admitted jobs (:func:`jobs.mark_started`). ``finish_deletion``
    false: a deleting cluster's RayCluster is deleted and nothing more is asked (a
    batch leaves the rest to the reconciler, which sees its pods go in the LISTs it
    makes anyway and finishes deletions in bulk)."""
    gw = gw or get_gateway()
    if cluster.is_job:
        jobs.converge_job(cluster, gw, bundles=bundles, started=started)
        return
    backend = queue_backend()
    state = cluster.state
    if state == State.QUEUED:
        if backend.provisions_queued:
            # The backend holds it suspended until admitted.
            apply_cluster(cluster, gw, bundles=bundles)
    elif state == State.ADMITTED:
        apply_cluster(cluster, gw, bundles=bundles)
        if applied is not None:
            applied.append(cluster)
        else:
            mark_applied([cluster])
    elif state == State.SUSPENDED and backend.suspend_deletes:
        delete_raycluster(gw, cluster.namespace, cluster.name)
    elif state in (State.PROVISIONING, State.READY, State.SUSPENDED):
        apply_cluster(cluster, gw, bundles=bundles)
    elif state == State.DELETING:
        if finish_deletion:
            converge_deletion(cluster, gw)
        else:
            delete_raycluster(gw, cluster.namespace, cluster.name)


def mark_applied(clusters: list[ClusterRequest]) -> list[ClusterRequest]:
    """Move admitted clusters whose objects were applied to ``provisioning`` (in a
    constant number of queries); returns those moved. A crash before this leaves them
    ``admitted``, and the sweeper converges them again (applies are idempotent)."""
    return transition_many(
        clusters,
        State.PROVISIONING,
        reason="applied",
        message="RayCluster applied; waiting for its pods",
    )
