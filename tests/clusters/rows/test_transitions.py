"""Unit tests of the state machine and the one helper that moves rows
(clusters.kinds.*.states, clusters.rows.transitions)."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from clusters.domain.states import InvalidTransition, State
from clusters.domain.workload_kinds import kind_named
from clusters.kinds.raycluster.states import TRANSITIONS
from clusters.kinds.rayjob.states import JOB_TRANSITIONS
from clusters.models import ClusterEvent, ClusterRequest, UsageSpan
from clusters.rows.transitions import note, release_gpus, release_gpus_many, transition

pytestmark = pytest.mark.django_db


def test_every_state_is_in_the_map_and_deleted_is_final() -> None:
    assert set(TRANSITIONS) | set(JOB_TRANSITIONS) == set(State)
    assert not TRANSITIONS[State.DELETED]
    assert not JOB_TRANSITIONS[State.DELETED]
    assert not kind_named("cluster").can_transition(State.DELETED, State.READY)
    # Each map moves only to its own states: a cluster never runs, a job is never ready.
    for moves, own in ((TRANSITIONS, set(TRANSITIONS)), (JOB_TRANSITIONS, set(JOB_TRANSITIONS))):
        assert set().union(*moves.values()) <= own
    assert not kind_named("cluster").can_transition(State.READY, State.RUNNING)
    assert not kind_named("job").can_transition(State.STARTING, State.READY)


def test_an_impossible_move_raises_and_changes_nothing(make_cluster: Any) -> None:
    cluster = make_cluster()
    cluster.save()
    with pytest.raises(InvalidTransition):
        transition(cluster, State.READY, reason="skip")
    assert ClusterRequest.objects.get(pk=cluster.pk).state == State.QUEUED
    assert not ClusterEvent.objects.filter(cluster=cluster).exists()


def test_a_stale_read_loses_the_race_and_writes_nothing(make_cluster: Any) -> None:
    cluster = make_cluster()
    cluster.save()
    stale = ClusterRequest.objects.get(pk=cluster.pk)
    assert transition(cluster, State.ADMITTED, reason="admitted")
    assert not transition(stale, State.DELETING, reason="deleted")
    assert ClusterRequest.objects.get(pk=cluster.pk).state == State.ADMITTED
    assert ClusterEvent.objects.filter(cluster=cluster).count() == 1


def test_gpus_are_held_from_admission_to_release_with_one_usage_span(make_cluster: Any) -> None:
    cluster = make_cluster()
    cluster.save()
    transition(cluster, State.ADMITTED, reason="admitted")
    transition(cluster, State.PROVISIONING, reason="applied")
    assert cluster.holds_gpus
    transition(cluster, State.DELETING, reason="deleted")
    assert cluster.holds_gpus  # until its pods are gone
    transition(cluster, State.DELETED, reason="deleted")
    assert not ClusterRequest.objects.get(pk=cluster.pk).holds_gpus
    spans = list(UsageSpan.objects.filter(cluster_id=cluster.pk))
    assert len(spans) == 1 and spans[0].ended_at is not None


def test_a_note_records_an_event_without_moving(make_cluster: Any) -> None:
    cluster = make_cluster()
    cluster.save()
    note(cluster, reason="extended", message="extended by 1 h")
    event = ClusterEvent.objects.get(cluster=cluster)
    assert (event.from_state, event.to_state, event.actor_name) == ("queued", "queued", "system")


def test_back_in_line_forgets_the_nodes_asked_for_an_earlier_admission(make_cluster: Any) -> None:
    cluster = make_cluster()
    cluster.save()
    transition(cluster, State.ADMITTED, reason="admitted")
    transition(cluster, State.PROVISIONING, reason="applied")
    ClusterRequest.objects.filter(pk=cluster.pk).update(
        capacity_state="provisioned", capacity_request="x-nodes-1", capacity_message="ok"
    )
    cluster.refresh_from_db()
    transition(cluster, State.SUSPENDED, reason="suspended")
    transition(cluster, State.QUEUED, reason="resumed")
    row = ClusterRequest.objects.get(pk=cluster.pk)
    assert (row.capacity_state, row.capacity_request, row.capacity_message) == ("", "", "")


def _holding(make_cluster: Any, count: int) -> list[ClusterRequest]:
    rows = []
    for i in range(count):
        cluster = make_cluster(name=f"held-{i}")
        cluster.save()
        transition(cluster, State.ADMITTED, reason="admitted")  # takes its GPUs
        rows.append(cluster)
    return rows


def test_many_rows_give_their_gpus_back_in_a_constant_number_of_queries(
    make_cluster: Any,
) -> None:
    def release(count: int) -> tuple[int, list[ClusterRequest]]:
        rows = _holding(make_cluster, count)
        with CaptureQueriesContext(connection) as queries:
            released = release_gpus_many(rows, message="its pods are gone; GPUs released")
        return len(queries), released

    few, released = release(2)
    ClusterRequest.objects.all().delete()
    many, released = release(20)
    assert few == many
    assert len(released) == 20 and not any(c.holds_gpus for c in released)
    ids = [c.pk for c in released]
    assert not ClusterRequest.objects.filter(pk__in=ids, holds_gpus=True).exists()
    assert ClusterRequest.objects.filter(pk__in=ids, gpus_released_at__isnull=False).count() == 20
    assert ClusterEvent.objects.filter(cluster_id__in=ids, reason="gpus_released").count() == 20
    assert not UsageSpan.objects.filter(cluster_id__in=ids, ended_at__isnull=True).exists()


def test_a_row_moved_or_released_meanwhile_is_left_alone(make_cluster: Any) -> None:
    kept, moved, gone = _holding(make_cluster, 3)
    stale = ClusterRequest.objects.get(pk=moved.pk)
    transition(stale, State.PROVISIONING, reason="applied")  # moved by another writer
    release_gpus(ClusterRequest.objects.get(pk=gone.pk), message="released before")
    released = release_gpus_many([kept, moved, gone], message="its pods are gone")
    assert released == [kept]
    assert ClusterRequest.objects.get(pk=moved.pk).holds_gpus
    assert ClusterEvent.objects.filter(cluster_id=gone.pk, reason="gpus_released").count() == 1
    assert moved.holds_gpus and gone.holds_gpus  # in memory: not released by this call
