"""A job's transition map and where it ends (clusters.kinds.rayjob.states)."""

from __future__ import annotations

from clusters.domain.states import State
from clusters.kinds.rayjob.kind import KIND
from clusters.kinds.rayjob.states import JOB_FINISHED, JOB_RELEASES, JOB_TRANSITIONS


def test_a_job_is_never_ready_and_its_end_keeps_gpus_until_its_pods_go() -> None:
    assert State.READY not in set().union(*JOB_TRANSITIONS.values())
    assert not KIND.can_transition(State.STARTING, State.READY)
    assert KIND.can_transition(State.RUNNING, State.SUCCEEDED)
    assert not (JOB_FINISHED & JOB_RELEASES)  # finished jobs keep GPUs until pods are gone
