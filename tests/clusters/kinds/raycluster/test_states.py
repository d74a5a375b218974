"""An interactive cluster's transition map and GPU releases (clusters.kinds.raycluster.states)."""

from __future__ import annotations

import pytest

from clusters.domain.states import InvalidTransition, State
from clusters.kinds.raycluster.kind import KIND
from clusters.kinds.raycluster.states import RELEASES, TRANSITIONS, WANTS_RAYCLUSTER


def test_a_cluster_never_runs_and_deleted_is_final() -> None:
    assert State.RUNNING not in set().union(*TRANSITIONS.values())
    assert not TRANSITIONS[State.DELETED]
    with pytest.raises(InvalidTransition):
        KIND.check_transition(State.DELETED, State.READY)
    KIND.check_transition(State.READY, State.SUSPENDED)


def test_suspending_or_failing_gives_gpus_back_and_its_raycluster_lives_while_held() -> None:
    assert {State.SUSPENDED, State.FAILED} <= RELEASES
    assert State.READY in WANTS_RAYCLUSTER and State.QUEUED not in WANTS_RAYCLUSTER
