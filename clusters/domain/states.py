"""A request's states: one enum and the groups every kind shares.

Each kind has its own transition map (``clusters/kinds/<kind>/states.py``), checked by
:meth:`clusters.domain.workload_kinds.Kind.check_transition` on every move, so an
impossible move is a bug caught where it is attempted, not found later in the data.
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
# its kind's ``releases`` gives them back. Other moves (say ready -> deleting) leave the
# flag as it was, so a deletion releases GPUs only once its pods are gone.
# ``ClusterRequest.holds_gpus`` carries the result; the quota ledger is the sum of
# ``gpus`` over rows that hold.
ACQUIRES = frozenset({State.ADMITTED})
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

# Where a workload that runs until it is deleted (a cluster, a service) gives its GPUs
# back: wherever its Ray object is not wanted.
LONG_RUNNING_RELEASES = frozenset({State.QUEUED, State.SUSPENDED, State.DELETED, State.FAILED})


def long_running_transitions(
    warming: State, *, warming_suspends: bool
) -> dict[State, frozenset[State]]:
    """The transition map of a workload that runs until it is deleted (a cluster, a
    service): ``queued -> admitted -> warming -> ready``, back to ``warming`` while it
    serves nothing, ``suspended`` from ``ready`` (and from ``warming`` where
    ``warming_suspends``) until it is queued again. Any live state may go back to
    ``queued``: in Kueue mode Kueue may evict it (preemption, a PodsReady timeout,
    deactivation), and the row then waits in the queue again, as the Workload does."""
    from_warming = {State.READY, State.QUEUED, State.DELETING, State.FAILED}
    if warming_suspends:
        from_warming.add(State.SUSPENDED)
    return {
        State.QUEUED: frozenset({State.ADMITTED, State.DELETING, State.FAILED}),
        State.ADMITTED: frozenset({warming, State.QUEUED, State.DELETING, State.FAILED}),
        warming: frozenset(from_warming),
        State.READY: frozenset(
            {warming, State.QUEUED, State.SUSPENDED, State.DELETING, State.FAILED}
        ),
        State.SUSPENDED: frozenset({State.QUEUED, State.DELETING, State.FAILED}),
        State.DELETING: frozenset({State.DELETED, State.FAILED}),
        State.FAILED: frozenset({State.DELETING}),
        State.DELETED: frozenset(),
    }


class InvalidTransition(Exception):
    """A state change that the transition map does not allow."""

    def __init__(self, current: str, target: str) -> None:
        super().__init__(f"cannot go from {current} to {target}")
        self.current = current
        self.target = target
