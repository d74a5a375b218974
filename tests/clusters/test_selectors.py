"""Unit tests of the cluster reads (clusters.selectors)."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from clusters import selectors
from clusters.domain.states import State

pytestmark = pytest.mark.django_db


def test_a_page_shows_the_live_cluster_before_deleted_ones_of_the_same_name(
    make_cluster: Any, acme: Any
) -> None:
    old = make_cluster(name="reused", state=State.DELETED, deleted_at=timezone.now())
    old.save()
    live = make_cluster(name="reused")
    live.save()
    assert selectors.cluster_for_page(tenant=acme, name="reused") == live
    assert selectors.cluster_for_page(tenant=acme, name="reused", pk=old.pk) == old
    live.state = State.DELETED
    live.deleted_at = timezone.now()
    live.save()
    assert selectors.cluster_for_page(tenant=acme, name="reused") == live  # latest deleted


def test_the_queue_lists_only_waiting_requests_in_position_order(
    make_cluster: Any, acme: Any
) -> None:
    second = make_cluster(name="second", queue_position=2)
    second.save()
    first = make_cluster(name="first", queue_position=1)
    first.save()
    make_cluster(name="running", state=State.READY).save()
    assert list(selectors.queue_list(tenant=acme)) == [first, second]


def test_an_owner_sees_their_clusters_but_not_deleted_ones(make_cluster: Any, bob: Any) -> None:
    make_cluster(name="gone", state=State.DELETED).save()
    kept = make_cluster(name="kept")
    kept.save()
    assert list(selectors.clusters_of_owner(user=bob)) == [kept]
