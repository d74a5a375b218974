"""The cluster request state machine: one enum, named groups and one transition map.

Every state change goes through :func:`check_transition` (called by the services that
move rows), so an impossible move — say ``deleted`` back to ``ready`` — is a bug caught
at the point it is attempted, not a mystery found later in the data.
"""

from __future__ import annotations

from django.db import models


class State(models.TextChoices):
    """Where a cluster request stands."""

    QUEUED = "queued", "Queued"
    ADMITTED = "admitted", "Admitted"
    PROVISIONING = "provisioning", "Provisioning"
    READY = "ready", "Ready"
    SUSPENDED = "suspended", "Suspended"
    DELETING = "deleting", "Deleting"
    DELETED = "deleted", "Deleted"
    FAILED = "failed", "Failed"
    # A job's own states (DESIGN "States"): its Ray cluster comes up (starting), its
    # driver runs (running), and it ends in one of three terminal states.
    STARTING = "starting", "Starting"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    STOPPED = "stopped", "Stopped"


# Entering one of these states takes the request's GPUs from the quota; entering one of
# RELEASES gives them back. Other moves (say ready -> deleting) leave the flag as it was,
# so a deletion releases GPUs only once its pods are gone. ``ClusterRequest.holds_gpus``
# carries the result; the quota ledger is the sum of ``gpus`` over rows that hold.
ACQUIRES = frozenset({State.ADMITTED})
RELEASES = frozenset({State.QUEUED, State.SUSPENDED, State.DELETED, State.FAILED})
HOLDS_QUOTA = frozenset(
    {State.ADMITTED, State.PROVISIONING, State.READY, State.STARTING, State.RUNNING}
)
# States in which the request still exists for its owner (counts against per-user caps).
LIVE = frozenset(
    {
        State.QUEUED,
        State.ADMITTED,
        State.PROVISIONING,
        State.READY,
        State.SUSPENDED,
        State.STARTING,
        State.RUNNING,
    }
)
# Where a job ends. Unlike a cluster's ``failed``, reaching one does not release the
# GPUs: its pods may still be running down (or kept by ``ttl_seconds_after_finished``),
# and the GPUs count until they are gone (:func:`clusters.rows.transitions.release_gpus`).
JOB_FINISHED = frozenset({State.SUCCEEDED, State.FAILED, State.STOPPED})
JOB_RELEASES = frozenset({State.QUEUED, State.DELETED})
# States whose RayCluster should exist (the queue backend may add ``queued`` and drop
# ``suspended``: :mod:`clusters.queue.interface`); other RayClusters are orphans.
WANTS_RAYCLUSTER = frozenset(
    {State.ADMITTED, State.PROVISIONING, State.READY, State.SUSPENDED, State.DELETING}
)

# ``provisioning``/``ready`` -> ``queued``: in Kueue mode, Kueue may evict a running
# cluster (preemption, a PodsReady timeout, deactivation); the row then gives its GPUs
# back and waits in the queue again, as the Workload does.
TRANSITIONS: dict[State, frozenset[State]] = {
    State.QUEUED: frozenset({State.ADMITTED, State.DELETING, State.FAILED}),
    State.ADMITTED: frozenset({State.PROVISIONING, State.QUEUED, State.DELETING, State.FAILED}),
    State.PROVISIONING: frozenset(
        {State.READY, State.QUEUED, State.SUSPENDED, State.DELETING, State.FAILED}
    ),
    State.READY: frozenset(
        {State.PROVISIONING, State.QUEUED, State.SUSPENDED, State.DELETING, State.FAILED}
    ),
    State.SUSPENDED: frozenset({State.QUEUED, State.DELETING, State.FAILED}),
    State.DELETING: frozenset({State.DELETED, State.FAILED}),
    State.FAILED: frozenset({State.DELETING}),
    State.DELETED: frozenset(),
}

# A job's moves. ``admitted``/``starting``/``running`` -> ``queued`` is Kueue evicting it
# (its RayJob is suspended again and waits); a job never becomes ``ready`` or
# ``suspended``, and a cluster never ``running``.
JOB_TRANSITIONS: dict[State, frozenset[State]] = {
    # ``queued -> starting``: a job on one of its owner's running dev clusters takes no
    # GPUs, so there is nothing to admit; it starts as it is written.
    State.QUEUED: frozenset(
        {State.ADMITTED, State.STARTING, State.DELETING, State.FAILED, State.STOPPED}
    ),
    State.ADMITTED: frozenset(
        {State.STARTING, State.QUEUED, State.DELETING, State.FAILED, State.STOPPED}
    ),
    State.STARTING: frozenset(
        {
            State.RUNNING,
            State.SUCCEEDED,
            State.FAILED,
            State.STOPPED,
            State.QUEUED,
            State.DELETING,
        }
    ),
    State.RUNNING: frozenset(
        {State.SUCCEEDED, State.FAILED, State.STOPPED, State.QUEUED, State.DELETING}
    ),
    State.SUCCEEDED: frozenset({State.DELETING}),
    State.FAILED: frozenset({State.DELETING}),
    State.STOPPED: frozenset({State.DELETING}),
    State.DELETING: frozenset({State.DELETED}),
    State.DELETED: frozenset(),
}


class InvalidTransition(Exception):
    """A state change that the transition map does not allow."""

    def __init__(self, current: str, target: str) -> None:
        super().__init__(f"cannot go from {current} to {target}")
        self.current = current
        self.target = target


def can_transition(current: str, target: str, *, job: bool = False) -> bool:
    """Whether the map (the jobs' map when ``job``) allows ``current`` -> ``target``."""
    moves = JOB_TRANSITIONS if job else TRANSITIONS
    return State(target) in moves.get(State(current), frozenset())


def check_transition(current: str, target: str, *, job: bool = False) -> None:
    """Raise :class:`InvalidTransition` unless ``current`` -> ``target`` is allowed."""
    if not can_transition(current, target, job=job):
        raise InvalidTransition(current, target)
