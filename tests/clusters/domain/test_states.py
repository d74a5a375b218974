"""A request's states (clusters.domain.states): the groups every kind shares, and the
error an impossible move raises."""

from __future__ import annotations

from clusters.domain.states import (
    ACQUIRES,
    HOLDS_QUOTA,
    LIVE,
    LONG_RUNNING_RELEASES,
    InvalidTransition,
    State,
    long_running_transitions,
)
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


def test_a_long_running_map_warms_up_in_the_state_it_is_given() -> None:
    moves = long_running_transitions(State.STARTING, warming_suspends=False)
    assert State.PROVISIONING not in set(moves).union(*moves.values())
    assert moves[State.ADMITTED] >= {State.STARTING} and State.READY in moves[State.STARTING]
    assert State.STARTING in moves[State.READY]  # back while it serves nothing
    assert State.SUSPENDED not in moves[State.STARTING]
    suspends = long_running_transitions(State.PROVISIONING, warming_suspends=True)
    assert State.SUSPENDED in suspends[State.PROVISIONING]
    # Every state it reaches has moves of its own; deleted is the end; and it gives its
    # GPUs back in exactly the states that cannot hold quota.
    assert set(moves).union(*moves.values()) == set(moves) and not moves[State.DELETED]
    assert not LONG_RUNNING_RELEASES & HOLDS_QUOTA
