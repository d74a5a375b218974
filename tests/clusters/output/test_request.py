"""The quick ``to_representation`` of the API's read serializers (``FlatModelOut``)
answers exactly what DRF's own loop over the same fields answers, byte for byte once
rendered, for clusters in every part of their life."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.utils import timezone
from rest_framework import serializers
from rest_framework.renderers import JSONRenderer
from rest_framework.test import APIRequestFactory

from clusters.api.queue_views import QueueEntryOut
from clusters.kinds.rayjob.output import JobOut
from clusters.models import ClusterEvent, Job, Workload
from clusters.output.request import ClusterListItemOut, ClusterOut, FlatModelOut
from clusters.selectors import cluster_list, cluster_list_items, with_recent_events

pytestmark = pytest.mark.django_db


@pytest.fixture
def clusters(make_cluster: Any, l4: Any) -> list[Any]:
    now = timezone.now()
    rows = [
        make_cluster(
            name="waiting",
            state="queued",
            accepted_flavors=["h100", "l4"],
            queue_position=3,
            queue_flavor_position=2,
            queue_reason="tenant_quota",
            queue_message="waiting for the tenant's quota",
            queue_eta=now + timedelta(minutes=7, microseconds=123),
            queue_flavors=[
                {"flavor": "h100", "position": 2, "reason": "r", "message": "m", "eta": None}
            ],
            env={"A": "1", "B": "two"},
            priority=5,
        ),
        make_cluster(
            name="up",
            kind="prod",
            state="ready",
            workers=2,
            min_workers=1,
            max_workers=4,
            admitted_at=now,
            ready_at=now,
            expires_at=now + timedelta(hours=2),
        ),
        make_cluster(
            name="frac",
            flavor=l4,
            gpu_fraction=Decimal("0.5"),
            state="failed",
            held_at=now,  # (as it was while it waited)
            hold_reason="by hand",
        ),
    ]
    for row in rows:
        row.save()
        ClusterEvent.objects.create(
            cluster=row, actor_name="system", from_state="", to_state=row.state, reason="x"
        )
    return rows


def _both(serializer: FlatModelOut, rows: list[Any]) -> tuple[bytes, bytes]:
    quick = JSONRenderer().render([serializer.to_representation(row) for row in rows])
    drf = JSONRenderer().render(
        [serializers.ModelSerializer.to_representation(serializer, row) for row in rows]
    )
    return quick, drf


def _list_rows(tenant: Any) -> list[Any]:
    return list(cluster_list_items(tenant=tenant).order_by("name"))


def _detail_rows(tenant: Any) -> list[Any]:
    # As the detail reads a row: with its recent history.
    return [with_recent_events(row) for row in cluster_list(tenant=tenant).order_by("name")]


@pytest.mark.parametrize(
    ("serializer", "rows_of"), [(ClusterListItemOut, _list_rows), (ClusterOut, _detail_rows)]
)
def test_cluster_representations_are_drfs(
    clusters: Any, acme: Any, serializer: Any, rows_of: Any
) -> None:
    request = APIRequestFactory().get("/")
    quick, drf = _both(serializer(context={"request": request}), rows_of(acme))
    assert quick == drf
    assert b'"waiting"' in quick and b'"queue":{"position":3' in quick


def test_queue_entry_is_drfs(clusters: Any) -> None:
    quick, drf = _both(QueueEntryOut(), [clusters[0]])
    assert quick == drf
    assert b'"flavor_standing":[{"flavor":"h100"' in quick


def test_a_jobs_representation_is_drfs(make_cluster: Any, acme: Any) -> None:
    row = make_cluster(name="train", workload="job", state="queued")
    row.save()
    Job.objects.create(request=row, entrypoint="python train.py", runtime_env={"pip": ["x"]})
    host = make_cluster(name="bench", state="ready")
    host.save()
    hosted = make_cluster(name="hosted", workload="job", state="starting")
    hosted.save()
    Job.objects.create(request=hosted, entrypoint="python eval.py", host=host, job_status="RUNNING")
    rows = list(
        cluster_list(tenant=acme, workload=Workload.JOB)
        .order_by("name")
        .prefetch_related("usage_spans")
    )
    quick, drf = _both(JobOut(), [with_recent_events(row) for row in rows])
    assert quick == drf
    assert b'"job":{"entrypoint":"python eval.py"' in quick and b'"cluster":"bench"' in quick
    assert b'"cluster":null' in quick


def test_plans_are_made_once_per_class_when_every_field_stands_alone() -> None:
    # The cluster's fields depend on their values alone: one plan serves every answer.
    assert ClusterOut()._plan is ClusterOut(context={"x": 1})._plan
    # So do a job's, its run a nested serializer of such fields.
    assert JobOut()._plan is JobOut(context={"x": 1})._plan
    # A nested serializer reads its parent's context: each queue entry serializer binds its own.
    assert QueueEntryOut._shared_plan() is None
    assert QueueEntryOut()._plan is not QueueEntryOut()._plan
