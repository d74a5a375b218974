"""The one rule that derives a notification kind from an event (notifications.event_kinds),
asked with each registered kind's ``finished`` states: a run's end is told as finished, a
cluster's failure as failed, and the notes and moves every kind shares the same way."""

from __future__ import annotations

import pytest

from clusters.domain.states import State
from clusters.domain.workload_kinds import kind_named
from notifications.event_kinds import SUSPENSION_CAUSES, EventKind, derive, maybe_notable

CLUSTER = kind_named("cluster").finished
JOB = kind_named("job").finished


@pytest.mark.parametrize("end", [State.SUCCEEDED, State.FAILED, State.STOPPED])
def test_a_job_entering_an_end_is_told_as_finished_never_as_failed(end: str) -> None:
    derived = derive(from_state=State.RUNNING, to_state=end, reason="ended", finished=JOB)
    assert derived is not None
    assert (derived.kind, derived.reason) == (EventKind.RUN_FINISHED, "ended")


def test_a_cluster_entering_failed_is_told_as_failed() -> None:
    derived = derive(
        from_state=State.PROVISIONING, to_state=State.FAILED, reason="error", finished=CLUSTER
    )
    assert derived is not None and derived.kind == EventKind.FAILED
    assert not CLUSTER  # an interactive cluster has no run that finishes


def test_ready_after_provisioning_and_the_warning_notes() -> None:
    ready = derive(
        from_state=State.PROVISIONING, to_state=State.READY, reason="ready", finished=CLUSTER
    )
    assert ready is not None and ready.kind == EventKind.CLUSTER_READY
    for reason, kind in [
        ("expiry_warning", EventKind.EXPIRING_SOON),
        ("idle_warning", EventKind.IDLE_WARNING),
        ("reclaim_warning", EventKind.RECLAIM_WARNING),
        ("held", EventKind.HELD),
        ("pods_failing", EventKind.PODS_FAILING),
    ]:
        note = derive(from_state=State.READY, to_state=State.READY, reason=reason, finished=CLUSTER)
        assert note is not None and note.kind == kind


def test_suspension_keeps_a_known_cause_and_expiry_counts_as_one() -> None:
    idle = derive(from_state=State.READY, to_state=State.SUSPENDED, reason="idle", finished=CLUSTER)
    other = derive(
        from_state=State.READY, to_state=State.SUSPENDED, reason="whatever", finished=CLUSTER
    )
    expired = derive(
        from_state=State.READY, to_state=State.DELETING, reason="expired", finished=CLUSTER
    )
    assert idle is not None and (idle.kind, idle.reason) == (EventKind.SUSPENDED, "idle")
    assert other is not None and other.reason == "suspended"
    assert expired is not None and (expired.kind, expired.reason) == (
        EventKind.SUSPENDED,
        "expired",
    )


def test_unremarkable_events_are_told_to_nobody() -> None:
    for from_state, to_state, reason in [
        (State.QUEUED, State.ADMITTED, "admitted"),
        (State.READY, State.DELETING, "deleted"),
        (State.READY, State.READY, "extended"),
    ]:
        assert derive(from_state=from_state, to_state=to_state, reason=reason, finished=JOB) is None
        assert not maybe_notable(from_state=from_state, to_state=to_state, reason=reason)


def test_maybe_notable_asks_every_registered_kind() -> None:
    # Notable for a job only (a cluster never enters succeeded), yet a candidate.
    assert maybe_notable(from_state=State.RUNNING, to_state=State.SUCCEEDED, reason="done")
    assert (
        derive(from_state=State.RUNNING, to_state=State.SUCCEEDED, reason="done", finished=CLUSTER)
        is None
    )


def test_a_service_scaled_to_zero_is_told_so() -> None:
    service = kind_named("service").finished
    scaled = derive(
        from_state=State.READY, to_state=State.SUSPENDED, reason="scaled_to_zero", finished=service
    )
    assert scaled is not None and (scaled.kind, scaled.reason) == (
        EventKind.SUSPENDED,
        "scaled_to_zero",
    )
    assert "the next request to its endpoint wakes it" in SUSPENSION_CAUSES[scaled.reason]
