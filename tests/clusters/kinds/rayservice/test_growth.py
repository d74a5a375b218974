"""What a service asks to grow by and when it gives it back: the GPUs of the replicas Ray
Serve waits to schedule, read from its deployments' status messages as KubeRay copies
them, and the steps on the rows (its pods as the reconciler's informer hands them over)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from django.utils import timezone

from clusters.kinds.rayservice.growth import growth_step, pending_cap, unscheduled_gpus
from clusters.kinds.rayservice.spec import INCREMENTAL, surge_workers
from clusters.models import ClusterRequest, Growth, Service, UsageSpan
from clusters.rows import growths


def test_the_gpus_serve_waits_for_are_read_from_its_deployments_messages() -> None:
    waiting = (
        "Deployment 'Model' in application 'model' has 2 replicas that have taken more than "
        "30s to be scheduled. This may be due to waiting for the cluster to auto-scale or "
        "for a runtime environment to be installed. Resources required for each replica: "
        "{'CPU': 0.0, 'GPU': 1.0}."
    )
    apps = {
        "model": {"deployments": {"Model": {"status": "UPDATING", "message": waiting}}},
        "other": {"deployments": {"Ingress": {"status": "HEALTHY", "message": ""}}},
    }
    assert unscheduled_gpus(apps) == 2
    cpu_only = waiting.replace("'GPU': 1.0", "'GPU': 0.0")
    assert unscheduled_gpus({"m": {"deployments": {"M": {"message": cpu_only}}}}) == 0
    assert unscheduled_gpus({}) == 0


WANTS_TWO = (
    "Deployment 'Model' in application 'model' has 2 replicas that have taken more than "
    "30s to be scheduled. Resources required for each replica: {'GPU': 1.0}."
)


def _pod(n: int, *, ready: bool = True, kind: str = "worker") -> dict[str, Any]:
    status = "True" if ready else "False"
    return {
        "metadata": {
            "name": f"c1-{kind}-{n}",
            "labels": {"ray.io/cluster": "c1", "ray.io/node-type": kind},
        },
        "status": {"conditions": [{"type": "Ready", "status": status}]},
    }


@pytest.fixture
def service(make_cluster: Any, alice: Any, l4: Any) -> ClusterRequest:
    """A ready service of 1 to 3 single-GPU workers, charged for 1, serving on c1."""
    row = make_cluster(
        owner=alice,
        name="model",
        workload="service",
        kind="prod",
        flavor=l4,
        workers=1,
        min_workers=1,
        max_workers=3,
        gpus=1,
        state="ready",
        holds_gpus=True,
        admitted_at=timezone.now(),
    )
    row.save()
    Service.objects.create(request=row, serve_config="", active_cluster="c1")
    UsageSpan.objects.create(
        tenant=row.tenant,
        cluster=row,
        username="alice",
        flavor_name="l4",
        kind="prod",
        gpus=1,
        started_at=timezone.now(),
    )
    return row


def _step(row: ClusterRequest, message: str, pods: list[dict[str, Any]]) -> None:
    details = Service.objects.get(pk=row.pk)
    details.applications = {
        "model": {"deployments": {"Model": {"status": "UPDATING", "message": message}}}
    }
    growth_step(row, details, pods)


@pytest.mark.django_db
def test_serve_waiting_for_replicas_asks_for_workers_within_max(service: Any) -> None:
    # A worker still coming up: the autoscaler has room yet, nothing is asked.
    _step(service, WANTS_TWO, [_pod(1, ready=False)])
    assert not Growth.objects.exists()
    _step(service, WANTS_TWO, [_pod(1)])
    growth = Growth.objects.get()
    assert (growth.workers, growth.gpus, growth.admitted_at) == (2, 2, None)
    # More wanted than max_workers allows: at most max - min workers.
    _step(service, WANTS_TWO.replace("has 2", "has 5"), [_pod(1)])
    assert Growth.objects.get().workers == 2
    # Serve wants nothing more: the waiting growth is dropped.
    _step(service, "", [_pod(1)])
    assert not Growth.objects.exists()


@pytest.mark.django_db
def test_an_admitted_growth_is_given_back_once_serve_is_back_at_min(service: Any) -> None:
    _step(service, WANTS_TWO.replace("has 2", "has 1"), [_pod(1)])
    (growth,) = Growth.objects.all()
    assert growths.admit([growth], now=timezone.now()) == [service.pk]
    spans = UsageSpan.objects.unscoped().filter(cluster=service, ended_at__isnull=True)
    assert [s.gpus for s in spans] == [Decimal(2)]
    Service.objects.filter(pk=service.pk).update(worker_cap=2, capped_cluster="c1")
    # Grown and busy: kept.
    _step(service, "", [_pod(1), _pod(2)])
    assert Growth.objects.get().admitted_at is not None
    # Idle workers removed by the autoscaler, back at min: given back.
    _step(service, "", [_pod(1), _pod(0, kind="head")])
    assert not Growth.objects.exists()
    spans = UsageSpan.objects.unscoped().filter(cluster=service, ended_at__isnull=True)
    assert [s.gpus for s in spans] == [Decimal(1)]
    assert service.events.filter(reason="growth_released").exists()


def test_an_incremental_upgrade_surges_by_its_share_of_the_guaranteed_size() -> None:
    assert surge_workers(INCREMENTAL, {"maxSurgePercent": 50}, 2) == 1
    assert surge_workers(INCREMENTAL, {"maxSurgePercent": 50}, 3) == 2  # rounded up
    assert surge_workers(INCREMENTAL, {"maxSurgePercent": 1}, 4) == 1  # at least one
    assert surge_workers(INCREMENTAL, {}, 4) == 4  # KubeRay's default: 100 %
    assert surge_workers("NewCluster", {"maxSurgePercent": 50}, 4) == 4  # a whole cluster


@pytest.mark.django_db
def test_the_new_cluster_may_run_the_surge_plus_what_the_old_one_gave_back(
    service: Any,
) -> None:
    ClusterRequest.objects.filter(pk=service.pk).update(workers=4, min_workers=4, max_workers=5)
    Service.objects.filter(pk=service.pk).update(
        upgrade_type=INCREMENTAL, upgrade_options={"maxSurgePercent": 25}, pending_cluster="c2"
    )
    row = ClusterRequest.objects.get(pk=service.pk)
    details = Service.objects.get(pk=service.pk)
    old = [_pod(n) for n in range(4)]
    new = [{"metadata": {"labels": {"ray.io/cluster": "c2", "ray.io/node-type": "worker"}}}]
    assert pending_cap(row, details, old + new) == 1  # the surge alone
    assert pending_cap(row, details, old[:2] + new) == 3  # and the two given back
    assert pending_cap(row, details, []) == 5  # the old one gone: surge and guaranteed
