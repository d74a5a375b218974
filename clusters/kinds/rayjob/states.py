"""A job's states: its transition map, where it ends and the states that give its GPUs
back."""

from __future__ import annotations

from clusters.domain.states import State

# Where a job ends. Unlike a cluster's ``failed``, reaching one does not release the
# GPUs: its pods may still be running down (or kept by ``ttl_seconds_after_finished``),
# and the GPUs count until they are gone (:func:`clusters.rows.transitions.release_gpus`).
JOB_FINISHED = frozenset({State.SUCCEEDED, State.FAILED, State.STOPPED})
JOB_RELEASES = frozenset({State.QUEUED, State.DELETED})

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
