"""A service's states: its transition map and the states that give its GPUs back.

A service is long-running like a cluster: ``queued -> admitted -> starting -> ready``,
back to ``starting`` while it serves nothing (its applications not all running, or its
RayCluster recreated), ``failed`` when KubeRay refuses its spec. An upgrade keeps it
``ready``: the row's service details say an upgrade is in progress. ``suspended`` is a
service scaled to zero (``scale_to_zero.py``): its RayService deleted, its GPUs given
back; a request to its endpoint puts it back in the queue.
"""

from __future__ import annotations

from clusters.domain.states import LONG_RUNNING_RELEASES, State, long_running_transitions

SERVICE_RELEASES = LONG_RUNNING_RELEASES
# States whose RayService should exist (others' are orphans).
WANTS_RAYSERVICE = frozenset({State.ADMITTED, State.STARTING, State.READY, State.DELETING})

# Only a serving service scales to zero: one still starting has had no requests to miss.
SERVICE_TRANSITIONS = long_running_transitions(State.STARTING, warming_suspends=False)
