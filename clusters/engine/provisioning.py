"""Provisioning steps: make Kubernetes match one request's row.

:func:`converge` asks the row's kind (``clusters/kinds/<kind>/engine.py``) to do the one
idempotent thing its state asks for; this module also takes the rows marked for a
provisioning step. Safe to run twice, in parallel, or after a crash at any point.
"""

from __future__ import annotations

from django.db import transaction

from clusters.domain.states import State
from clusters.domain.workload_kinds import kind_named, kind_of
from clusters.kube.bundles import BatchBundles
from clusters.kube.connection import gateway_of
from clusters.kube.gateway import Gateway
from clusters.models import ClusterRequest
from clusters.queue.backends import queue_backend
from clusters.rows.transitions import transition_many


def apply_cluster(
    cluster: ClusterRequest, gw: Gateway, *, bundles: BatchBundles | None = None
) -> None:
    """Apply the tenant bundle and the row's objects (idempotent; ``bundles``: a batch's)."""
    kind_of(cluster).behaviour.apply(cluster, gw, bundles=bundles)


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
            .select_for_update(skip_locked=True, no_key=True)
            .values_list("pk", flat=True)[:limit]
        )
        if ids:
            ClusterRequest.objects.unscoped().filter(pk__in=ids).update(provision_requested_at=None)
    return ids


def any_admitted() -> bool:
    """Whether rows are admitted and not yet applied (a batch still at work)."""
    return ClusterRequest.objects.unscoped().filter(state=State.ADMITTED).exists()


def wants_provisioning(cluster: ClusterRequest) -> bool:
    """Whether the row's state asks anything of Kubernetes now (its kind says)."""
    return kind_of(cluster).behaviour.wants_provisioning(cluster)


def converge(
    cluster: ClusterRequest,
    gw: Gateway | None = None,
    *,
    bundles: BatchBundles | None = None,
    admitted: list[ClusterRequest] | None = None,
    finish_deletion: bool = True,
) -> None:
    """Do what the row's state asks of Kubernetes, as its kind does it. ``bundles`` as
    for :func:`apply_cluster`. ``admitted``: an admitted row whose objects were applied
    is put there instead of being moved on at once, so that a batch moves all of its rows
    together (:func:`mark_started`). ``finish_deletion`` false: a deleting row's objects
    are deleted and the rest is left to the reconciler, which finishes deletions in bulk.
    ``gw``: the gateway to the member the row is placed on (looked up without it)."""
    placed = gw or gateway_of(cluster)
    gw = queue_backend().writes_through(cluster, placed)
    if gw is not placed:
        # A copy runs on its member: the member's pass finishes the deletion once the
        # copy and its pods are gone there, not when the original is.
        finish_deletion = False
    behaviour = kind_of(cluster).behaviour
    if cluster.state == State.ADMITTED:
        # Every kind starts alike: its objects are applied, then the row moves on.
        behaviour.apply(cluster, gw, bundles=bundles)
        if admitted is not None:
            admitted.append(cluster)
        else:
            mark_started([cluster])
        return
    behaviour.converge(cluster, gw, bundles=bundles, finish_deletion=finish_deletion)


def mark_started(rows: list[ClusterRequest]) -> list[ClusterRequest]:
    """Move admitted rows whose objects were applied to their kind's ``started`` state (in a
    constant number of queries per kind); returns those moved. A crash before this
    leaves them ``admitted``, and the sweeper converges them again."""
    by_kind: dict[str, list[ClusterRequest]] = {}
    for row in rows:
        by_kind.setdefault(row.workload, []).append(row)
    moved: list[ClusterRequest] = []
    for workload, group in by_kind.items():
        kind = kind_named(workload)
        moved.extend(
            transition_many(group, kind.started, reason="applied", message=kind.applied_message)
        )
    return moved
