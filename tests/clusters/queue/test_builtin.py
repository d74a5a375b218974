"""The built-in queue (clusters.queue.builtin): a queued request asks for the admission
pass after commit, and the pass decides on the database; its defaults are the
interface's (clusters.queue.interface): nothing held in the cluster, nothing to fold."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import transaction

from clusters.domain.states import State
from clusters.models import ClusterRequest
from clusters.queue.builtin import BuiltinQueue
from clusters.queue.interface import QueueView
from clusters.rows import enqueue
from tests.clusters.conftest import Broker, broker

__all__ = ["broker"]  # a fixture, used by name


def test_a_queued_request_asks_for_one_pass_after_commit(broker: Broker) -> None:
    queue = BuiltinQueue()
    with transaction.atomic():
        queue.request_queued(1)
        queue.request_queued(2)
        assert broker.tasks(enqueue.ADMISSION_PASS) == []
    assert len(broker.tasks(enqueue.ADMISSION_PASS)) == 1


@pytest.mark.django_db
def test_the_pass_admits_what_fits_and_the_view_folds_nothing(make_cluster: Any) -> None:
    row = make_cluster()
    row.save()
    queue = BuiltinQueue()
    result = queue.admission_pass()
    assert result.admitted == [row.pk] and not result.skipped
    assert ClusterRequest.objects.get(pk=row.pk).state == State.ADMITTED
    assert not queue.provisions_queued and not queue.suspend_deletes
    assert not queue.fixed_size_only and queue.folds_incrementally
    view = queue.observe(None, [row])  # type: ignore[arg-type]  # reads nothing
    assert type(view) is QueueView and view.fold_eviction(row) is False
