"""Which cluster events users hear about: the notification kinds and the one rule that
derives a kind from a :class:`clusters.models.ClusterEvent`.

The rule reads only the event's states and reason (and which states end a run of the
request's kind), so the engine writes nothing new for notifications: the events it
already records are the outbox. Pure functions, no database.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from django.db import models

from clusters.domain.states import State
from clusters.domain.workload_kinds import kinds


class EventKind(models.TextChoices):
    """What a notification is about (the ``event`` field of a webhook body)."""

    CLUSTER_READY = "cluster_ready", "Cluster ready"
    EXPIRING_SOON = "expiring_soon", "Expiring soon"
    IDLE_WARNING = "idle_warning", "Idle warning"
    RECLAIM_WARNING = "reclaim_warning", "Reclaim warning"
    # Notice of a preemption to come (a job's, or one for priority): docs/preemption.md.
    PREEMPTION_NOTICE = "preemption_notice", "Preemption notice"
    # A job preempted at the end of its notice and requeued to resume from its checkpoint.
    PREEMPTED = "preempted", "Preempted and requeued"
    HELD = "held", "Put on hold"
    PODS_FAILING = "pods_failing", "Pods cannot start"
    SUSPENDED = "suspended", "Suspended, reclaimed or expired"
    FAILED = "failed", "Cluster failed"
    # Its Kubernetes cluster is drained: what happens to it (requeued, or runs to its end).
    MEMBER_DRAIN = "member_drain", "Kubernetes cluster drained"
    # A run of any kind entered one of its `Kind.finished` states; value and label are public.
    RUN_FINISHED = "job_finished", "Job finished"
    # A tenant or engineer reached a monthly cost cap (docs/cost.md); not derived from a
    # cluster event: notifications.cost_notices writes these deliveries itself.
    COST_CAP = "cost_cap", "Cost cap reached"


# A delivery's kind: one of the above, or a test sent from the webhooks page or API.
TEST = "test"
DELIVERY_KINDS = [*EventKind.choices, (TEST, "Test")]

# The ``reason`` a ``suspended`` notice carries, and how it reads.
SUSPENSION_CAUSES = {
    "idle": "was suspended because it was idle; its GPUs were released",
    "reclaimed": "was suspended (reclaimed) to give another tenant its quota back; "
    "its GPUs were released",
    "expired": "expired: its time to live ran out and it is being deleted",
    "suspended": "was suspended; its GPUs were released",
    "scaled_to_zero": "was scaled to zero after its window without requests; its GPUs "
    "were released and the next request to its endpoint wakes it",
}


# The notes (no move) told to the owner, by their reason.
_NOTES = {
    "expiry_warning": EventKind.EXPIRING_SOON,
    "idle_warning": EventKind.IDLE_WARNING,
    "reclaim_warning": EventKind.RECLAIM_WARNING,
    "preemption_notice": EventKind.PREEMPTION_NOTICE,
    "held": EventKind.HELD,
    "pods_failing": EventKind.PODS_FAILING,
}


@dataclass(frozen=True)
class Derived:
    """An event's kind and the reason its notice carries."""

    kind: EventKind
    reason: str


def derive(
    *, from_state: str, to_state: str, reason: str, finished: Collection[str]
) -> Derived | None:
    """The notification kind of one ClusterEvent, or ``None`` if nobody is told of it;
    ``finished`` are the states that end a run of the request's kind (``Kind.finished``).

    - ``job_finished``: entering one of ``finished`` (a job's ``succeeded``, ``failed``
      or ``stopped``; a failure there is told as a finished run, not also as ``failed``);
    - ``failed``: entering ``failed`` otherwise;
    - ``cluster_ready``: ``provisioning`` -> ``ready``;
    - ``expiring_soon``: the note ``expiry_warning``; ``idle_warning``: the note
      ``idle_warning``; ``reclaim_warning``: the note ``reclaim_warning`` (borrowed
      GPUs wanted back, the cluster to be suspended after a grace);
      ``preemption_notice``: the note ``preemption_notice`` (a job, or a request outranked,
      to be preempted at the end of its notice); ``held``: the note
      ``held`` (a tenant admin put the queued request on hold); ``pods_failing``: the
      note ``pods_failing`` (an image cannot be pulled, containers crash). Each is a warning the
      request's page shows, so its owner hears of it too;
    - ``preempted``: a move with reason ``preempted`` (a job requeued at the end of its
      notice, to resume from its last checkpoint);
    - ``member_drain``: reason ``member_drain``, a drain of the Kubernetes cluster it runs
      on, as a move back to the queue or a note that it runs to its end there;
    - ``suspended``: entering ``suspended`` (reason ``idle``, ``reclaimed``,
      ``scaled_to_zero``, or a person's ``suspended``), or entering ``deleting`` with
      reason ``expired``.
    """
    moved = from_state != to_state
    if reason == "member_drain":
        return Derived(EventKind.MEMBER_DRAIN, reason)
    if moved and reason == "preempted":
        return Derived(EventKind.PREEMPTED, reason)
    if moved and to_state in finished:
        return Derived(EventKind.RUN_FINISHED, reason)
    if moved and to_state == State.FAILED:
        return Derived(EventKind.FAILED, reason)
    if moved and to_state == State.READY and from_state == State.PROVISIONING:
        return Derived(EventKind.CLUSTER_READY, reason)
    if not moved and reason in _NOTES:
        return Derived(_NOTES[reason], reason)
    if moved and to_state == State.SUSPENDED:
        return Derived(EventKind.SUSPENDED, reason if reason in SUSPENSION_CAUSES else "suspended")
    if moved and to_state == State.DELETING and reason == "expired":
        return Derived(EventKind.SUSPENDED, "expired")
    return None


def maybe_notable(*, from_state: str, to_state: str, reason: str) -> bool:
    """Whether an event could be notable for a request of any kind: cheap, no query (the
    dispatcher decides exactly)."""
    return any(
        derive(from_state=from_state, to_state=to_state, reason=reason, finished=kind.finished)
        is not None
        for kind in kinds().values()
    )
