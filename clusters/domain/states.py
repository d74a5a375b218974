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


class InvalidTransition(Exception):
    """A state change that the transition map does not allow."""

    def __init__(self, current: str, target: str) -> None:
        super().__init__(f"cannot go from {current} to {target}")
        self.current = current
        self.target = target
