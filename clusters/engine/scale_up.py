"""Capacity on demand (built-in queue): ask the cluster autoscaler for a gang's nodes
and follow its answer.

The admission pass marks a request the quota admits but the nodes cannot hold, on a
flavor that can grow (``capacity_state`` ``requested``); :func:`request_capacity` writes
its ProvisioningRequest and PodTemplates. Each reconcile pass folds the autoscaler's
answer (:func:`fold_capacity`): ``Provisioned`` makes the gang admissible on that flavor
(the nodes are booked for it); ``Failed``, or a lapsed booking, puts it back in line
with a time to ask again. Requests no gang waits for are deleted.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction

from clusters.domain.states import State
from clusters.domain.workload_kinds import kind_of
from clusters.kube import provisioning_requests
from clusters.kube.bundles import apply_into
from clusters.kube.conditions import condition
from clusters.kube.gateway import Gateway, KubeError
from clusters.kube.manifests import cluster_manifests
from clusters.models import ClusterRequest
from clusters.queue.backends import manifest_options
from clusters.rows.transitions import note

log = logging.getLogger(__name__)

PROVREQ = ("autoscaling.x-k8s.io/v1", "ProvisioningRequest")
# While a request is one of these, its ProvisioningRequest may still be needed.
NEEDS_REQUEST = frozenset({State.QUEUED, State.ADMITTED, State.PROVISIONING, State.STARTING})


def _ray_cluster_spec(cluster: ClusterRequest) -> dict[str, Any]:
    # The Ray object is the last one applied (claim templates, if any, come first).
    obj = cluster_manifests(cluster, **manifest_options())[-1]
    for key in kind_of(cluster).ray_cluster_spec_at:
        obj = obj[key]
    return dict(obj)


def request_capacity(cluster: ClusterRequest, gw: Gateway) -> None:
    """Write the PodTemplates and then the ProvisioningRequest of the row's current
    attempt into the tenant's namespace, its bundle first (idempotent: server-side
    applies of deterministic objects).

    A write that fails is put on the row (``last_error`` and, once per distinct error,
    its timeline), so that its page says what failed and that it is tried again rather
    than that the autoscaler is thinking; the error is raised on for the caller to retry.
    """
    if cluster.capacity_state != "requested" or not cluster.capacity_request:
        return
    objects = provisioning_requests.capacity_objects(
        cluster, _ray_cluster_spec(cluster), name=cluster.capacity_request
    )
    try:
        apply_into(cluster.tenant, gw, objects)
    except KubeError as exc:
        _not_written(cluster, exc.message)
        raise
    if cluster.last_error:
        ClusterRequest.objects.filter(pk=cluster.pk, capacity_state="requested").update(
            last_error=""
        )
        cluster.last_error = ""


@transaction.atomic
def _not_written(row: ClusterRequest, error: str) -> None:
    """Record that the row's ProvisioningRequest could not be written (once per error)."""
    if row.last_error == error:
        return
    claimed = ClusterRequest.objects.filter(
        pk=row.pk, state=State.QUEUED, capacity_state="requested"
    ).update(last_error=error)
    if claimed:
        row.last_error = error
        note(
            row,
            reason="nodes_request_failed",
            message=f"could not ask the cluster autoscaler for new {row.flavor.name} nodes "
            f"({error}); trying again"[:500],
        )


def delete_capacity(gw: Gateway, namespace: str, request: dict[str, Any] | None, name: str) -> None:
    """Delete a ProvisioningRequest and the PodTemplates it names (absent is fine)."""
    templates = [
        str((ps.get("podTemplateRef") or {}).get("name") or "")
        for ps in ((request or {}).get("spec") or {}).get("podSets") or []
    ]
    gw.delete("autoscaling.x-k8s.io/v1", "ProvisioningRequest", name, namespace)
    for template in filter(None, templates):
        gw.delete("v1", "PodTemplate", template, namespace)


def fold_capacity(rows: list[ClusterRequest], gw: Gateway) -> list[int]:
    """Fold the autoscaler's answers into the rows that asked; returns the rows whose
    nodes were provisioned (the caller asks for an admission pass). Reads the requests
    with one LIST, and only when some row asked for nodes."""
    asking = [r for r in rows if r.capacity_request]
    if not asking:
        return []
    found = {
        (r["metadata"]["namespace"], r["metadata"]["name"]): r
        for r in gw.list(*PROVREQ, label_selector="app.kubernetes.io/managed-by=gangway")
    }
    provisioned: list[int] = []
    wanted: set[tuple[str, str]] = set()
    for row in asking:
        key = (row.namespace, row.capacity_request)
        request = found.get(key)
        if row.state in NEEDS_REQUEST and row.capacity_state in ("requested", "provisioned"):
            wanted.add(key)
        try:
            if _fold_one(row, request, gw):
                provisioned.append(row.pk)
        except KubeError as exc:
            log.warning("capacity of %s: %s", row, exc.message)
    for key, request in found.items():
        if key not in wanted and not request["metadata"].get("deletionTimestamp"):
            try:
                delete_capacity(gw, key[0], request, key[1])
            except KubeError as exc:
                log.warning("capacity request %s: %s", key, exc.message)
    return provisioned


def _fold_one(row: ClusterRequest, request: dict[str, Any] | None, gw: Gateway) -> bool:
    """One waiting row's request: provisioned, failed, lapsed, or still being looked at."""
    if row.state != State.QUEUED or row.capacity_state not in ("requested", "provisioned"):
        return False
    if request is None:
        if row.capacity_state == "requested":
            request_capacity(row, gw)  # it vanished (or was never written): again
        else:
            _failed(row, "its ProvisioningRequest vanished before the gang was admitted")
        return False
    failed = condition(request, "Failed")
    lapsed = condition(request, "BookingExpired")
    if failed.get("status") == "True" or lapsed.get("status") == "True":
        cond = failed if failed.get("status") == "True" else lapsed
        _failed(row, str(cond.get("message") or cond.get("reason") or "failed"))
        return False
    provisioned = condition(request, "Provisioned")
    message = str(provisioned.get("message") or "")[:500]
    if provisioned.get("status") == "True" and row.capacity_state == "requested":
        return _move(
            row,
            "provisioned",
            message,
            reason="nodes_provisioned",
            note_message=f"the cluster autoscaler provisioned its nodes: {message}",
        )
    if message and message != row.capacity_message:
        ClusterRequest.objects.filter(pk=row.pk).update(capacity_message=message)
    return False


def _failed(row: ClusterRequest, message: str) -> None:
    _move(
        row,
        "failed",
        message,
        reason="capacity_failed",
        note_message=f"the cluster autoscaler could not add its nodes: {message}",
    )


@transaction.atomic
def _move(row: ClusterRequest, to: str, message: str, *, reason: str, note_message: str) -> bool:
    """Move a queued request's capacity from the state it was read in to ``to`` and
    record why; returns whether this caller moved it. The claim and its event commit
    together: whoever sees the row moved also sees why (and a crash between them
    cannot lose the event)."""
    claimed = ClusterRequest.objects.filter(
        pk=row.pk, state=State.QUEUED, capacity_state=row.capacity_state
    ).update(capacity_state=to, capacity_message=message[:500])
    if claimed:
        row.capacity_state = to
        note(row, reason=reason, message=note_message[:500])
    return bool(claimed)
