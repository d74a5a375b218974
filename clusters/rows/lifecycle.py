"""The moves of a cluster request that users and the system both make.

Deleting, suspending and Kueue's evictions are asked for by engineers (through
:mod:`clusters.requests.services`, which first checks that they may) and by the system
itself: the reconciler deletes a cluster whose TTL ran out, the admission pass suspends a
borrower to give a tenant its quota back, Kueue evicts. Each move here is atomic, locks
the row, moves state only through :func:`clusters.rows.transitions.transition`, audits in the
same transaction (``actor`` ``None`` is the system) and asks for the follow-up work after
commit (:mod:`clusters.rows.enqueue`).
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import ForeignKey
from django.utils import timezone

from clusters.domain.states import State
from clusters.models import ClusterRequest
from clusters.rows import enqueue
from clusters.rows.transitions import transition
from controlplane.exceptions import ServiceConflict
from tenants.audit import audit_record


def locked(cluster: ClusterRequest) -> ClusterRequest:
    """The row re-read under a row lock (inside the caller's transaction).

    The tenant, flavor and owner the caller had loaded stay loaded when the row still
    points at them: the audit record and the API's answer read them, a query each.
    """
    row: ClusterRequest = (
        ClusterRequest.objects.unscoped().select_for_update(no_key=True).get(pk=cluster.pk)
    )
    for name in _RELATED:
        field = ClusterRequest._meta.get_field(name)
        assert isinstance(field, ForeignKey)
        if field.is_cached(cluster) and field.value_from_object(row) == field.value_from_object(
            cluster
        ):
            setattr(row, name, getattr(cluster, name))
    return row


_RELATED = ("tenant", "flavor", "owner")


def locked_in(cluster: ClusterRequest, state: str, refusal: str) -> ClusterRequest:
    """:func:`locked`, refused (``ServiceConflict`` ``invalid_state``) unless the row is in
    ``state``; ``refusal`` says what only such a row may do ("Only a ready cluster ...")."""
    row = locked(cluster)
    if row.state != state:
        raise ServiceConflict(f"{refusal}; this one is {row.state}.", code="invalid_state")
    return row


def request_deletion(
    cluster: ClusterRequest, *, actor: Any = None, reason: str = "deleted"
) -> ClusterRequest:
    """Move the cluster to ``deleting``; its GPUs are released once its pods are gone.

    Deleting a cluster that is already being deleted is a no-op. Expiry uses reason
    ``expired``.
    """
    with transaction.atomic():
        cluster = locked(cluster)
        if cluster.state in (State.DELETING, State.DELETED):
            return cluster
        transition(
            cluster,
            State.DELETING,
            reason=reason,
            actor=actor,
            message="expired: its TTL ran out" if reason == "expired" else "deletion requested",
            deletion_reason=reason,
            provision_requested_at=timezone.now(),
        )
        audit_record(
            actor=actor,
            action=f"{cluster.workload}.delete",
            obj=cluster,
            tenant=cluster.tenant,
            data={"reason": reason},
        )
        enqueue.provision_marked()
    return cluster


def suspend(
    cluster: ClusterRequest, *, actor: Any = None, reason: str = "suspended", message: str = ""
) -> ClusterRequest:
    """Suspend a running cluster: its pods go, its GPUs return to the pool, the row stays.

    A cluster in any state but ``provisioning`` or ``ready`` is refused
    (``ServiceConflict`` ``invalid_state``); an already suspended one is left as it is.
    """
    with transaction.atomic():
        cluster = locked(cluster)
        if cluster.state == State.SUSPENDED:
            return cluster
        if cluster.state not in (State.PROVISIONING, State.READY):
            raise ServiceConflict(
                f"A {cluster.state} cluster cannot be suspended.", code="invalid_state"
            )
        transition(
            cluster,
            State.SUSPENDED,
            reason=reason,
            actor=actor,
            message=message or "suspended; its GPUs were released",
            suspended_at=timezone.now(),
            ready_at=None,
            provision_requested_at=timezone.now(),
        )
        audit_record(actor=actor, action="cluster.suspend", obj=cluster, tenant=cluster.tenant)
        enqueue.provision_marked()
        enqueue.admission_pass()  # its GPUs may start a waiting request
    return cluster


def _back_in_line(queue_reason: str, queue_message: str) -> dict[str, Any]:
    """The fields of a running row sent back to the queue by the system (an eviction, a
    drain): no admission, no readiness, its queue standing to be read again. Its TTL
    starts again when it is admitted again (as after a resume)."""
    return {
        "admitted_at": None,
        "ready_at": None,
        "expires_at": None,
        "expiry_warned_at": None,
        "queue_position": None,
        "queue_flavor_position": None,
        "queue_reason": queue_reason,
        "queue_message": queue_message[:500],
        "queue_eta": None,
    }


def requeue_evicted(
    cluster: ClusterRequest, *, reason: str, message: str, queue_reason: str
) -> ClusterRequest:
    """Kueue evicted a running cluster (or job): back to ``queued`` with Kueue's reason.

    Its GPUs are released and its usage span closed by the move; the RayCluster stays
    (Kueue has suspended it and will admit it again). ``reason`` is Kueue's (e.g.
    ``Preempted``), ``message`` the Workload's; ``queue_reason`` the queue code shown
    until the next reconcile reads Kueue's verdict again.
    """
    with transaction.atomic():
        cluster = locked(cluster)
        if cluster.state not in (
            State.ADMITTED,
            State.PROVISIONING,
            State.READY,
            State.STARTING,
            State.RUNNING,
        ):
            return cluster
        text = (
            f"Kueue evicted it ({reason}): {message}" if message else f"Kueue evicted it ({reason})"
        )
        if not transition(
            cluster,
            State.QUEUED,
            reason=reason,
            message=f"{text}. Its GPUs were released; it waits to be admitted again."[:500],
            **_back_in_line(queue_reason, f"Kueue: {message or reason}"),
        ):
            return cluster
        audit_record(
            actor=None,
            action=f"{cluster.workload}.evict",
            obj=cluster,
            tenant=cluster.tenant,
            data={"reason": reason, "message": message[:500]},
        )
    return cluster


def requeue_drained(cluster: ClusterRequest, *, member_id: int, home: bool, message: str) -> bool:
    """A drain of the member ``cluster`` runs on sends it back to the queue: its GPUs are
    released, its placement forgotten (admission places it afresh, never on a draining
    member), and the move (reason ``member_drain``) tells its owner ``message``. Whether
    it moved (``home``: the member also runs the unplaced rows): a row no longer on it
    (moved, finished, deleted) is left as it is, so a drain's step may run twice."""
    with transaction.atomic():
        cluster = locked(cluster)
        placed = cluster.kube_cluster_id
        if placed != member_id and not (home and placed is None):
            return False
        if cluster.state not in REQUEUED_BY_DRAIN:
            return False
        if not transition(
            cluster,
            State.QUEUED,
            reason="member_drain",
            message=message[:500],
            **_back_in_line("", message),
        ):
            return False
        audit_record(
            actor=None,
            action=f"{cluster.workload}.requeue",
            obj=cluster,
            tenant=cluster.tenant,
            data={"reason": "member_drain", "kube_cluster": member_id},
        )
        enqueue.admission_pass()
    return True


# The states a drain sends back to the queue: placed and not finished, not being deleted.
REQUEUED_BY_DRAIN = frozenset(
    {State.ADMITTED, State.PROVISIONING, State.READY, State.STARTING, State.RUNNING}
)
