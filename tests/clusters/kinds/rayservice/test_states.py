"""A service's transition map and the states that give its GPUs back
(clusters.kinds.rayservice.states)."""

from __future__ import annotations

import pytest

from clusters.domain.states import State
from clusters.kinds.rayservice.kind import KIND
from clusters.kinds.rayservice.states import (
    SERVICE_RELEASES,
    SERVICE_TRANSITIONS,
    WANTS_RAYSERVICE,
)


@pytest.mark.parametrize(
    ("current", "target"),
    [
        (State.QUEUED, State.ADMITTED),
        (State.ADMITTED, State.STARTING),
        (State.STARTING, State.READY),
        (State.READY, State.STARTING),  # degraded, or its RayService recreated
        (State.READY, State.SUSPENDED),  # scaled to zero
        (State.SUSPENDED, State.QUEUED),  # woken by a request to its endpoint
        (State.READY, State.QUEUED),  # evicted
        (State.FAILED, State.DELETING),
        (State.DELETING, State.DELETED),
    ],
)
def test_the_moves_a_service_makes_are_allowed(current: State, target: State) -> None:
    assert KIND.can_transition(current, target)


@pytest.mark.parametrize(
    ("current", "target"),
    [
        (State.QUEUED, State.READY),  # never without admission and a start
        (State.STARTING, State.SUSPENDED),  # only a serving service scales to zero
        (State.SUSPENDED, State.READY),  # it queues again first
        (State.FAILED, State.QUEUED),
        (State.DELETED, State.DELETING),
        (State.STARTING, State.RUNNING),  # a job's states are not a service's
        (State.READY, State.SUCCEEDED),
    ],
)
def test_other_moves_are_refused(current: State, target: State) -> None:
    assert not KIND.can_transition(current, target)


def test_deleted_is_the_end_and_a_job_s_states_are_never_reached() -> None:
    assert SERVICE_TRANSITIONS[State.DELETED] == frozenset()
    reached = set().union(*SERVICE_TRANSITIONS.values())
    assert not reached & {State.RUNNING, State.SUCCEEDED, State.STOPPED, State.PROVISIONING}
    assert reached <= set(SERVICE_TRANSITIONS)  # every state reached has its own moves


def test_gpus_go_back_where_no_rayservice_is_wanted() -> None:
    assert {State.QUEUED, State.SUSPENDED, State.DELETED, State.FAILED} == SERVICE_RELEASES
    assert {State.ADMITTED, State.STARTING, State.READY, State.DELETING} == WANTS_RAYSERVICE
    # A state either wants its RayService (and holds GPUs) or gives its GPUs back.
    assert not SERVICE_RELEASES & WANTS_RAYSERVICE
    assert set(SERVICE_TRANSITIONS) == SERVICE_RELEASES | WANTS_RAYSERVICE
