"""What a reconcile pass may skip (clusters.engine.foldmemo): a row's stamp moves with
any write to the columns a fold reads, the memo keeps only quiet rows that are still
live, and rows near their expiry or waiting on the autoscaler are always folded."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from clusters.domain.states import State
from clusters.engine.foldmemo import FoldMemo, LiveRow, always_folded, live_rows, skips_allowed
from clusters.models import ClusterRequest, Service

pytestmark = pytest.mark.django_db


def _row(**fields: Any) -> LiveRow:
    values: dict[str, Any] = {
        "pk": 1,
        "tenant_id": 1,
        "name": "a",
        "state": State.READY,
        "workload": "cluster",
        "expires_at": None,
        "asks_for_capacity": False,
        "stamp": ("x",),
    }
    values.update(fields)
    return LiveRow(**values)


def test_live_rows_leave_out_the_deleted_and_a_write_moves_the_stamp(make_cluster: Any) -> None:
    kept = make_cluster(name="kept")
    kept.save()
    make_cluster(name="gone", state=State.DELETED).save()
    (row,) = live_rows()
    assert (row.pk, row.name, row.state, row.workload) == (kept.pk, "kept", "queued", "cluster")
    # One transaction here, so one xmin: a column the fold reads moves the stamp too.
    ClusterRequest.objects.filter(pk=kept.pk).update(state=State.ADMITTED)
    (again,) = live_rows()
    assert again.stamp != row.stamp and again.state == State.ADMITTED


def test_a_write_to_a_kind_s_own_table_moves_its_row_s_stamp(make_cluster: Any) -> None:
    service = make_cluster(name="svc", workload="service", state=State.STARTING)
    service.save()
    Service.objects.create(request=service, serve_config="applications: []")
    cluster = make_cluster(name="plain")
    cluster.save()
    before = {row.pk: row.stamp for row in live_rows()}
    # One transaction here, so one xmin: the column its kind declares moves the stamp.
    Service.objects.filter(pk=service.pk).update(applications={"app": {"status": "RUNNING"}})
    after = {row.pk: row.stamp for row in live_rows()}
    assert after[service.pk] != before[service.pk]
    assert after[cluster.pk] == before[cluster.pk]


def test_the_memo_remembers_quiet_rows_and_forgets_acted_and_gone_ones() -> None:
    memo = FoldMemo()
    memo.settle({1: ("s1",), 2: ("s2",), 3: ("s3",)}, acted=[], live=[1, 2, 3])
    assert memo.unchanged(1, ("s1",)) and not memo.unchanged(1, ("other",))
    memo.settle({}, acted=[2], live=[2, 3])  # 1 was deleted, 2 changed
    assert not memo.unchanged(1, ("s1",))
    assert not memo.unchanged(2, ("s2",))
    assert memo.unchanged(3, ("s3",))
    memo.clear()
    assert not memo.unchanged(3, ("s3",))


def test_a_full_pass_forgets_everything_when_due(settings: Any) -> None:
    memo = FoldMemo()
    memo.settle({1: ("s1",)}, acted=[], live=[1])
    settings.RECONCILE_FULL_PASS_SECONDS = 3600
    memo.begin()
    assert memo.unchanged(1, ("s1",))
    settings.RECONCILE_FULL_PASS_SECONDS = 0
    memo.begin()
    assert not memo.unchanged(1, ("s1",))


def test_rows_near_expiry_or_asking_for_capacity_are_always_folded(settings: Any) -> None:
    now = timezone.now()
    settings.EXPIRY_WARNING_MINUTES = 30
    assert not always_folded(_row(), now)
    assert always_folded(_row(asks_for_capacity=True), now)
    assert always_folded(_row(expires_at=now + timedelta(minutes=10)), now)
    assert not always_folded(_row(expires_at=now + timedelta(hours=2)), now)


def test_skips_need_an_incremental_backend_and_postgresql() -> None:
    assert skips_allowed(True)  # the suite runs on PostgreSQL
    assert not skips_allowed(False)
