"""A service's states: its transition map and the states that give its GPUs back.

A service is long-running like a cluster: ``queued -> admitted -> starting -> ready``,
back to ``starting`` while it serves nothing (its applications not all running, or its
RayCluster recreated), ``failed`` when KubeRay refuses its spec. An upgrade keeps it
``ready``: the row's service details say an upgrade is in progress. ``suspended`` is a
service scaled to zero (``scale_to_zero.py``): its RayService deleted, its GPUs given
back; a request to its endpoint puts it back in the queue.
"""

from __future__ import annotations

from clusters.domain.states import State

SERVICE_RELEASES = frozenset({State.QUEUED, State.SUSPENDED, State.DELETED, State.FAILED})
# States whose RayService should exist (others' are orphans).
WANTS_RAYSERVICE = frozenset({State.ADMITTED, State.STARTING, State.READY, State.DELETING})

SERVICE_TRANSITIONS: dict[State, frozenset[State]] = {
    State.QUEUED: frozenset({State.ADMITTED, State.DELETING, State.FAILED}),
    State.ADMITTED: frozenset({State.STARTING, State.QUEUED, State.DELETING, State.FAILED}),
    State.STARTING: frozenset({State.READY, State.QUEUED, State.DELETING, State.FAILED}),
    State.READY: frozenset(
        {State.STARTING, State.QUEUED, State.SUSPENDED, State.DELETING, State.FAILED}
    ),
    State.SUSPENDED: frozenset({State.QUEUED, State.DELETING, State.FAILED}),
    State.DELETING: frozenset({State.DELETED, State.FAILED}),
    State.FAILED: frozenset({State.DELETING}),
    State.DELETED: frozenset(),
}
