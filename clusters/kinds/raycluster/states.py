"""An interactive cluster's states: its transition map, the states that give its GPUs
back and those whose RayCluster should exist."""

from __future__ import annotations

from clusters.domain.states import LONG_RUNNING_RELEASES, State, long_running_transitions

RELEASES = LONG_RUNNING_RELEASES
# States whose RayCluster should exist (the queue backend may add ``queued`` and drop
# ``suspended``: :mod:`clusters.queue.interface`); other RayClusters are orphans.
WANTS_RAYCLUSTER = frozenset(
    {State.ADMITTED, State.PROVISIONING, State.READY, State.SUSPENDED, State.DELETING}
)

# A cluster still provisioning holds its GPUs, so a reclaim may suspend it as it does a
# ready one.
TRANSITIONS = long_running_transitions(State.PROVISIONING, warming_suspends=True)
