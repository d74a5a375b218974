"""Finishing a deletion (clusters.engine.deletion): the row moves to ``deleted`` with
its deletion's reason, and its GPUs go back to the quota with that move."""

from __future__ import annotations

from typing import Any

import pytest

from clusters.domain.states import InvalidTransition, State
from clusters.engine.deletion import DELETED_MESSAGE, finish_deletion
from clusters.models import ClusterRequest
from clusters.rows.lifecycle import request_deletion
from clusters.rows.transitions import transition

pytestmark = pytest.mark.django_db


def test_a_deleting_row_is_deleted_with_its_reason_and_gives_its_gpus_back(
    make_cluster: Any,
) -> None:
    cluster = make_cluster()
    cluster.save()
    transition(cluster, State.ADMITTED, reason="admitted")
    cluster = request_deletion(cluster, reason="expired")
    assert cluster.holds_gpus  # until the pods are gone
    assert finish_deletion(cluster)
    row = ClusterRequest.objects.get(pk=cluster.pk)
    assert row.state == State.DELETED and not row.holds_gpus and row.deleted_at is not None
    last = row.events.latest("at")
    assert (last.reason, last.message) == ("expired", DELETED_MESSAGE)


def test_a_row_not_deleting_cannot_be_finished(make_cluster: Any) -> None:
    cluster = make_cluster()
    cluster.save()
    with pytest.raises(InvalidTransition):
        finish_deletion(cluster)  # queued: its map has no move to deleted
    assert ClusterRequest.objects.get(pk=cluster.pk).state == State.QUEUED
