"""The idle policy, one reading at a time (clusters/engine/idle.py ``apply_activity``).

What Ray says is given as an :class:`Activity` here; reading it from a dashboard through
the service proxy is covered end to end in ``tests/clusters/live/test_idle_e2e.py``.
Times are explicit (``now``) so that an hour of idleness takes no time.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from clusters.domain.states import State
from clusters.engine.idle import IdleReport, apply_activity
from clusters.kube.raydash import Activity
from clusters.models import ClusterEvent, ClusterRequest, IdleSpan, UsageSpan
from clusters.requests import services
from clusters.selectors import cluster_activity, usage_summary
from tests.frontend.conftest import make_ready, request_cluster

__all__ = ["request_cluster"]  # a fixture, used by name

IDLE = Activity(active=False, last_active_at=None, reason="no Ray driver or job is running")
BUSY = Activity(active=True, last_active_at=None, reason="job raysubmit_1 is running")


@pytest.fixture(autouse=True)
def _quiet(monkeypatch: Any) -> None:
    # Suspension asks for provisioning and an admission pass; no worker runs here.
    from tests.frontend.browser import quiet_nudges

    quiet_nudges(monkeypatch)


@pytest.fixture
def ready(bob: Any, request_cluster: Any) -> ClusterRequest:
    cluster = make_ready(request_cluster(bob, name="bob-idle"))
    # As the reconciler does when it finds the cluster ready:
    ClusterRequest.objects.filter(pk=cluster.pk).update(ready_at=timezone.now())
    return ClusterRequest.objects.select_related("tenant", "owner", "flavor").get(pk=cluster.pk)


def _fresh(cluster: ClusterRequest) -> ClusterRequest:
    return ClusterRequest.objects.select_related("tenant", "owner", "flavor").get(pk=cluster.pk)


def _read(cluster: ClusterRequest, activity: Activity, now: Any) -> tuple[ClusterRequest, Any]:
    """One reading, of the row as a pass reads it (its tenant's policy as it is now)."""
    report = IdleReport()
    apply_activity(_fresh(cluster), activity, now=now, report=report)
    fresh = ClusterRequest.objects.select_related("tenant", "owner", "flavor").get(pk=cluster.pk)
    return fresh, report


def _reasons(cluster: ClusterRequest) -> list[str]:
    return list(ClusterEvent.objects.filter(cluster=cluster).values_list("reason", flat=True))


def test_an_idle_dev_cluster_is_warned_at_the_threshold_then_suspended_after_the_grace(
    ready: ClusterRequest, settings: Any
) -> None:
    settings.IDLE_GRACE_MINUTES = 15
    start = ready.ready_at
    cluster, report = _read(ready, IDLE, start + timedelta(minutes=59))
    assert not report.warned and cluster.idle_warned_at is None
    cluster, report = _read(cluster, IDLE, start + timedelta(minutes=61))
    assert report.warned == ["bob-idle"]
    assert cluster.idle_warned_at == start + timedelta(minutes=61)
    warning = ClusterEvent.objects.get(cluster=cluster, reason="idle_warning")
    assert "idle for 61 min" in warning.message and "unless it is used or kept alive" in (
        warning.message
    )
    # Warned once: the next reading inside the grace does nothing new.
    cluster, report = _read(cluster, IDLE, start + timedelta(minutes=70))
    assert not report.warned and not report.suspended
    assert _reasons(cluster).count("idle_warning") == 1
    cluster, report = _read(cluster, IDLE, start + timedelta(minutes=76))
    assert report.suspended == ["bob-idle"]
    assert cluster.state == State.SUSPENDED and not cluster.holds_gpus
    event = ClusterEvent.objects.filter(cluster=cluster, to_state=State.SUSPENDED).get()
    assert event.reason == "idle" and "idle for 76 min" in event.message


def test_use_after_the_warning_withdraws_it(ready: ClusterRequest) -> None:
    start = ready.ready_at
    cluster, _ = _read(ready, IDLE, start + timedelta(minutes=61))
    assert cluster.idle_warned_at is not None
    cluster, report = _read(cluster, BUSY, start + timedelta(minutes=65))
    assert cluster.idle_warned_at is None and cluster.last_active_at == start + timedelta(
        minutes=65
    )
    cluster, report = _read(cluster, IDLE, start + timedelta(minutes=90))
    assert cluster.state == State.READY and not report.suspended and not report.warned


def test_a_job_that_ran_between_two_readings_counts_as_use(ready: ClusterRequest) -> None:
    start = ready.ready_at
    cluster, _ = _read(ready, IDLE, start + timedelta(minutes=61))
    ended = start + timedelta(minutes=63)
    seen = Activity(active=False, last_active_at=ended, reason="no Ray driver or job is running")
    cluster, _report = _read(cluster, seen, start + timedelta(minutes=80))
    assert cluster.state == State.READY and cluster.idle_warned_at is None
    assert cluster.last_active_at == ended


def test_keep_alive_restarts_the_idle_clock(ready: ClusterRequest, bob: Any) -> None:
    start = ready.ready_at
    cluster, _ = _read(ready, IDLE, start + timedelta(minutes=61))
    kept = services.cluster_keepalive(actor=bob, cluster=cluster)
    assert kept.idle_warned_at is None
    assert "kept_alive" in _reasons(cluster)
    fresh = ClusterRequest.objects.select_related("tenant", "owner", "flavor").get(pk=cluster.pk)
    # A reading a little later finds it idle for minutes, not for an hour: no action.
    cluster, report = _read(fresh, IDLE, timezone.now() + timedelta(minutes=5))
    assert cluster.state == State.READY and not report.warned and not report.suspended


def test_keep_alive_is_for_owners_and_admins_of_ready_clusters(
    ready: ClusterRequest, vera: Any, alice: Any
) -> None:
    from django.core.exceptions import PermissionDenied

    from controlplane.exceptions import ServiceConflict

    with pytest.raises(PermissionDenied):
        services.cluster_keepalive(actor=vera, cluster=ready)
    services.cluster_keepalive(actor=alice, cluster=ready)
    services.cluster_suspend(actor=alice, cluster=ready)
    with pytest.raises(ServiceConflict, match="Only a ready cluster can be kept alive"):
        services.cluster_keepalive(actor=alice, cluster=ready)


def test_a_busy_cluster_is_never_warned(ready: ClusterRequest) -> None:
    start = ready.ready_at
    cluster = ready
    for minutes in (30, 61, 120, 240):
        cluster, report = _read(cluster, BUSY, start + timedelta(minutes=minutes))
        assert not report.warned and cluster.idle_warned_at is None
    assert cluster.last_active_at == start + timedelta(minutes=240)


def test_the_policy_is_off_at_zero_and_for_production_unless_opted_in(
    ready: ClusterRequest, acme: Any
) -> None:
    start = ready.ready_at
    acme.idle_suspend_minutes = 0
    acme.save()
    cluster, report = _read(ready, IDLE, start + timedelta(hours=5))
    assert not report.warned
    # The reading is kept all the same: the page says how long it has been idle.
    assert cluster_activity(cluster, now=start + timedelta(hours=5))["idle_minutes"] == 300
    acme.idle_suspend_minutes = 60
    acme.save()
    ClusterRequest.objects.filter(pk=cluster.pk).update(kind="prod")
    cluster.refresh_from_db()
    cluster, report = _read(cluster, IDLE, start + timedelta(hours=6))
    assert not report.warned
    acme.idle_suspend_prod = True
    acme.save()
    cluster.refresh_from_db()
    cluster, report = _read(cluster, IDLE, start + timedelta(hours=7))
    assert report.warned == ["bob-idle"]


def test_idle_time_is_kept_apart_in_the_usage_report(ready: ClusterRequest, acme: Any) -> None:
    acme.idle_suspend_minutes = 0  # measure only
    acme.save()
    # The cluster became ready two hours ago (its usage span too): busy until minute 30,
    # idle until 90, busy, idle again from 90 (last use) until it is suspended now.
    start = timezone.now() - timedelta(minutes=120)
    ClusterRequest.objects.filter(pk=ready.pk).update(admitted_at=start, ready_at=start)
    UsageSpan.objects.filter(cluster=ready).update(started_at=start)
    ready.refresh_from_db()
    cluster, _ = _read(ready, BUSY, start + timedelta(minutes=30))
    cluster, _ = _read(cluster, IDLE, start + timedelta(minutes=60))
    span = IdleSpan.objects.get(cluster=cluster)
    assert span.started_at == start + timedelta(minutes=30) and span.ended_at is None
    cluster, _ = _read(cluster, BUSY, start + timedelta(minutes=90))
    span.refresh_from_db()
    assert span.ended_at == start + timedelta(minutes=90)
    cluster, _ = _read(cluster, IDLE, start + timedelta(minutes=100))
    services.cluster_suspend(actor=None, cluster=cluster)
    second = IdleSpan.objects.filter(cluster=cluster).order_by("started_at").last()
    assert second is not None and second.started_at == start + timedelta(minutes=90)
    assert second.ended_at is not None  # closed with the GPUs
    summary = usage_summary(
        tenant=acme, since=start - timedelta(days=1), until=timezone.now() + timedelta(days=1)
    )
    row = next(r for r in summary["by_user"] if r["user"] == "bob")
    assert row["gpu_hours"] == pytest.approx(2.0, abs=0.01)
    assert row["idle_gpu_hours"] == pytest.approx(1.5, abs=0.01)  # 60 min + 30 min
    assert row["active_gpu_hours"] == pytest.approx(0.5, abs=0.01)
    assert summary["idle_gpu_hours"] == row["idle_gpu_hours"]
