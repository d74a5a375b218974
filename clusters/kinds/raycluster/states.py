"""An interactive cluster's states: its transition map, the states that give its GPUs
back and those whose RayCluster should exist."""

from __future__ import annotations

from clusters.domain.states import State

RELEASES = frozenset({State.QUEUED, State.SUSPENDED, State.DELETED, State.FAILED})
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
