"""Idle reclaim end to end: the activity pass reads each ready cluster's activity from
kubesim's Ray dashboard through the service proxy (``clusters.engine.idle``), warns the
idle one, suspends it after the grace, and its GPUs admit the request that waited for
them; a busy cluster (an interactive driver connected: kubesim's ``kubesim.io/ray-driver``
knob) and a cluster kept alive are left alone. ``now`` is passed to the pass so that an
hour of idleness takes no time.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from django.utils import timezone

from clusters import tasks
from clusters.domain.states import State
from clusters.engine.idle import check_activity
from clusters.kube.gateway import get_gateway
from clusters.models import ClusterEvent, ClusterRequest
from clusters.queue.admission_pass import run_admission_pass
from clusters.requests import services
from tenants.models import Quota


def _row(cluster: ClusterRequest) -> ClusterRequest:
    return ClusterRequest.objects.select_related("tenant").get(pk=cluster.pk)


def test_an_idle_cluster_is_warned_then_suspended_and_its_gpus_admit_the_next_request(
    live_cluster: ClusterRequest, kubesim: Any, alice: Any, request_cluster: Any, settings: Any
) -> None:
    settings.IDLE_GRACE_MINUTES = 10
    Quota.objects.filter(tenant=live_cluster.tenant, flavor=live_cluster.flavor).update(
        gpus=1, borrow_limit=0
    )
    waiting = request_cluster(alice, name="alice-next")
    run_admission_pass()
    assert _row(waiting).state == State.QUEUED  # bob's cluster holds the tenant's one GPU

    now = timezone.now()
    report = check_activity(now=now + timedelta(minutes=5))
    assert report.checked == 1 and report.unreachable == 0 and not report.warned
    row = _row(live_cluster)
    assert row.activity_checked_at is not None
    assert row.activity_note == "no Ray driver or job is running"

    report = check_activity(now=now + timedelta(minutes=61))
    assert report.warned == ["bob-live"]
    warning = ClusterEvent.objects.get(cluster=live_cluster, reason="idle_warning")
    assert "idle for 6" in warning.message

    report = check_activity(now=now + timedelta(minutes=72))
    assert report.suspended == ["bob-live"]
    row = _row(live_cluster)
    assert row.state == State.SUSPENDED and not row.holds_gpus
    assert ClusterEvent.objects.filter(
        cluster=row, to_state=State.SUSPENDED, reason="idle"
    ).exists()
    run_admission_pass()
    assert _row(waiting).state == State.ADMITTED


def test_a_busy_cluster_is_not_warned(live_cluster: ClusterRequest, kubesim: Any) -> None:
    kubesim.set_ray_driver(live_cluster.namespace, live_cluster.name, "active")
    # The beat task is the same pass (it runs every ACTIVITY_CHECK_SECONDS).
    assert tasks.check_activity() == {
        "checked": 1,
        "unreachable": 0,
        "warned": 0,
        "suspended": 0,
        "reclaimed": 0,
    }
    assert _row(live_cluster).activity_note == "Number of active drivers: 1"
    later = timezone.now() + timedelta(hours=3)
    report = check_activity(now=later)
    assert report.checked == 1 and not report.warned and not report.suspended
    row = _row(live_cluster)
    assert row.last_active_at == later and row.idle_warned_at is None
    # The driver disconnects: idle from that moment on, as Ray reports it.
    kubesim.set_ray_driver(live_cluster.namespace, live_cluster.name, "idle")
    report = check_activity(now=later + timedelta(minutes=1))
    assert not report.warned
    assert _row(live_cluster).activity_note == "no Ray driver or job is running"


def test_a_job_submitted_through_the_dashboard_keeps_it_busy(
    live_cluster: ClusterRequest, kubesim: Any
) -> None:
    _submit(live_cluster)
    report = check_activity(now=timezone.now() + timedelta(hours=2))
    assert report.checked == 1 and not report.warned
    assert _row(live_cluster).activity_note.startswith(("job ", "Number of active drivers"))


def _submit(cluster: ClusterRequest) -> None:
    answer = get_gateway().service_proxy(
        "POST",
        cluster.namespace,
        f"{cluster.name}-head-svc",
        "dashboard",
        "api/jobs/",
        headers={"Content-Type": "application/json"},
        body=json.dumps(
            {"entrypoint": "python train.py", "metadata": {"kubesim.io/job-run-seconds": "600"}}
        ).encode(),
    )
    assert answer.status == 200, answer.read(1000)
    answer.read(1000)


def test_a_cluster_kept_alive_is_not_suspended(
    live_cluster: ClusterRequest, kubesim: Any, bob: Any, settings: Any
) -> None:
    live_cluster.tenant.idle_suspend_minutes = 1
    live_cluster.tenant.save()
    now = timezone.now()
    assert check_activity(now=now + timedelta(minutes=2)).warned == ["bob-live"]
    services.cluster_keepalive(actor=bob, cluster=live_cluster)
    # The grace would be over, but the cluster was kept alive 0 minutes ago: no action.
    report = check_activity(now=timezone.now() + timedelta(seconds=30))
    assert not report.suspended and not report.warned
    assert _row(live_cluster).state == State.READY


def test_a_dashboard_that_does_not_answer_is_not_taken_for_idleness(
    live_cluster: ClusterRequest, kubesim: Any, alice: Any
) -> None:
    live_cluster.tenant.idle_suspend_minutes = 1
    live_cluster.tenant.save()
    # The head goes away under a ready row (the reconciler would notice later).
    get_gateway().merge_patch(
        "ray.io/v1", "RayCluster", live_cluster.name, {"spec": {"suspend": True}}, "gw-acme"
    )
    report = check_activity(now=timezone.now() + timedelta(hours=5))
    assert report.unreachable == 1 and not report.warned
    assert _row(live_cluster).activity_note.startswith("activity unknown:")


def test_a_dashboard_answer_cut_mid_body_is_unreachable_not_an_error(
    live_cluster: ClusterRequest, kubesim: Any
) -> None:
    # The connection reset while the dashboard's answer came through the service proxy
    # (kubesim's RESET): the pass goes on and the cluster's clock stops, as for any
    # dashboard that cannot be read. urllib3's ProtocolError once escaped the pass.
    from kubesim.faults import RESET

    live_cluster.tenant.idle_suspend_minutes = 1
    live_cluster.tenant.save()
    kubesim.set_faults(rate=1.0, codes=(RESET,))
    report = check_activity(now=timezone.now() + timedelta(hours=5))
    kubesim.clear_faults()
    assert report.unreachable == 1 and not report.warned
    assert _row(live_cluster).activity_note.startswith("activity unknown:")
    assert "cannot reach" in _row(live_cluster).activity_note


def test_a_dashboard_read_refused_with_429_waits_its_retry_after(
    live_cluster: ClusterRequest, kubesim: Any
) -> None:
    # The service proxy answered 429 Retry-After: 30: the next pass does not ask that
    # dashboard again before then (the Kubernetes API suite caught idle reads 0.4 s after a
    # 429), and says why the cluster's activity is unknown.
    kubesim.set_faults(rate=1.0, codes=(429,), retry_after=30, verb_rates={"proxy": 1.0})
    first = check_activity(now=timezone.now())
    kubesim.clear_faults()
    asked = kubesim.faults.stats()["requests"]["total"]
    second = check_activity(now=timezone.now())
    assert first.unreachable == 1 and second.unreachable == 1
    assert "waiting" in _row(live_cluster).activity_note
    assert "as asked (429)" in _row(live_cluster).activity_note
    assert kubesim.faults.stats()["requests"]["total"] == asked  # the second sent nothing
