"""A request's states (clusters.domain.states): the groups every kind shares, and the
error an impossible move raises."""

from __future__ import annotations

from clusters.domain.states import ACQUIRES, HOLDS_QUOTA, LIVE, InvalidTransition, State
from clusters.domain.workload_kinds import kinds


def test_quota_is_acquired_on_admission_and_held_only_while_live() -> None:
    assert ACQUIRES <= HOLDS_QUOTA <= LIVE
    assert State.QUEUED in LIVE and State.QUEUED not in HOLDS_QUOTA
    assert not LIVE & {State.DELETING, State.DELETED, State.FAILED, State.SUCCEEDED}


def test_no_kind_releases_quota_in_a_state_that_holds_it() -> None:
    for kind in kinds().values():
        assert not kind.releases & HOLDS_QUOTA, kind.workload
        assert kind.finished <= set(kind.transitions), kind.workload


def test_invalid_transition_names_both_states() -> None:
    error = InvalidTransition(State.DELETED, State.READY)
    assert (error.current, error.target) == (State.DELETED, State.READY)
    assert str(error) == "cannot go from deleted to ready"
