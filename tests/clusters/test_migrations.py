"""Data migrations of the clusters app, run on real rows of the schema before them."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from clusters.domain import shapes

BEFORE = ("clusters", "0001_initial")
AFTER = ("clusters", "0002_earmark_and_charge_autoscaling_at_max")


def _migrate(target: tuple[str, str]) -> Any:
    executor = MigrationExecutor(connection)
    executor.migrate([target])
    return executor.loader.project_state(target).apps


@pytest.fixture
def back_to_latest() -> Any:
    """Leave the schema at the newest migrations, whatever the test stopped at: a later
    test in the same database needs every table (the next migrations create some)."""
    yield
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


@pytest.mark.django_db(transaction=True)
def test_running_autoscaling_clusters_are_recharged_at_their_largest_size(
    alice: Any, acme: Any, h100: Any, back_to_latest: None
) -> None:
    """Rows written while autoscaling clusters were charged for ``workers`` only get the
    charge ``shapes.demand`` gives them now; a running one's usage span is split."""
    old_apps = _migrate(BEFORE)
    Row = old_apps.get_model("clusters", "ClusterRequest")
    Span = old_apps.get_model("clusters", "UsageSpan")
    spec = shapes.flavor_spec(h100)
    old = shapes.worker_resources(kind="prod", flavor=spec, gpu_fraction=None)
    started = timezone.now() - timedelta(hours=2)

    def row(name: str, state: str, holds: bool, **shape: Any) -> Any:
        workers = shape["workers"]
        return Row.objects.create(
            tenant_id=acme.pk,
            owner_id=alice.pk,
            flavor_id=h100.pk,
            name=name,
            kind="prod",
            state=state,
            holds_gpus=holds,
            gpus=Decimal(old.gpus * workers),
            cpu=shapes.HEAD_CPU + old.cpu * workers,
            memory_gib=shapes.HEAD_MEMORY_GIB + old.memory_gib * workers,
            **shape,
        )

    serve = row("serve", "ready", True, workers=1, min_workers=1, max_workers=4)
    Span.objects.create(
        tenant_id=acme.pk,
        cluster_id=serve.pk,
        username="alice",
        flavor_name="h100",
        kind="prod",
        gpus=Decimal(8),
        started_at=started,
    )
    waiting = row("later", "queued", False, workers=2, max_workers=3)
    shrinks = row("shrinks", "ready", True, workers=2, min_workers=1)
    fixed = row("fixed", "ready", True, workers=2)

    # Read through the models as they were at AFTER: today's have columns that later
    # migrations add.
    new_apps = _migrate(AFTER)
    ClusterRequest = new_apps.get_model("clusters", "ClusterRequest")
    UsageSpan = new_apps.get_model("clusters", "UsageSpan")
    ClusterEvent = new_apps.get_model("clusters", "ClusterEvent")

    for pk, size in ((serve.pk, 4), (waiting.pk, 3), (shrinks.pk, 2), (fixed.pk, 2)):
        now = ClusterRequest.objects.get(pk=pk)
        want = shapes.demand(
            kind="prod",
            flavor=spec,
            workers=now.workers,
            min_workers=now.min_workers,
            max_workers=now.max_workers,
            gpu_fraction=None,
        )
        assert (now.gpus, now.cpu, now.memory_gib) == (want.gpus, want.cpu, want.memory_gib)
        assert now.gpus == 8 * size
    spans = list(UsageSpan.objects.filter(cluster_id=serve.pk).order_by("started_at"))
    assert [(s.gpus, s.ended_at is None) for s in spans] == [(8, False), (32, True)]
    assert spans[0].started_at == started and spans[0].ended_at == spans[1].started_at
    assert ClusterEvent.objects.get(cluster_id=serve.pk).reason == "recharged"
    quiet = [waiting.pk, shrinks.pk, fixed.pk]  # its GPUs did not change, or it holds none
    assert not ClusterEvent.objects.filter(cluster_id__in=quiet).exists()
