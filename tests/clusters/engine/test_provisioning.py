"""The provision pass's shared steps (clusters.engine.provisioning): taking the marked
rows once each, and moving a batch's applied rows on as each kind starts."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from clusters.domain.states import State
from clusters.engine.provisioning import (
    any_admitted,
    mark_started,
    take_requested,
    wants_provisioning,
)
from clusters.models import ClusterEvent, ClusterRequest, Workload
from clusters.rows.transitions import transition

pytestmark = pytest.mark.django_db


def test_marked_rows_are_taken_oldest_first_once_each(make_cluster: Any) -> None:
    now = timezone.now()
    rows = []
    for i, age in enumerate((1, 3, 2)):
        row = make_cluster(name=f"m{i}", provision_requested_at=now - timedelta(minutes=age))
        row.save()
        rows.append(row)
    make_cluster(name="unmarked").save()
    assert take_requested(2) == [rows[1].pk, rows[2].pk]
    assert take_requested(10) == [rows[0].pk]
    assert take_requested(10) == []
    assert not ClusterRequest.objects.filter(provision_requested_at__isnull=False).exists()


def test_a_batch_moves_on_as_each_kind_starts(make_cluster: Any) -> None:
    cluster = make_cluster(name="c")
    job = make_cluster(name="j", workload=Workload.JOB)
    for row in (cluster, job):
        row.save()
        transition(row, State.ADMITTED, reason="admitted")
    assert any_admitted()
    moved = mark_started([cluster, job])
    assert {row.pk for row in moved} == {cluster.pk, job.pk}
    states = dict(ClusterRequest.objects.values_list("name", "state"))
    assert states == {"c": State.PROVISIONING, "j": State.STARTING}
    said = ClusterEvent.objects.filter(reason="applied").values_list("cluster__name", "message")
    assert dict(said) == {
        "c": "RayCluster applied; waiting for its pods",
        "j": "RayJob unsuspended; its Ray cluster is starting",
    }
    assert not any_admitted()


def test_a_queued_cluster_asks_nothing_of_kubernetes_under_the_built_in_queue(
    make_cluster: Any, settings: Any
) -> None:
    settings.QUEUE_MODE = "builtin"
    assert not wants_provisioning(make_cluster())
    assert wants_provisioning(make_cluster(state=State.READY))
    settings.QUEUE_MODE = "kueue"  # Kueue holds the written RayCluster suspended
    assert wants_provisioning(make_cluster())
