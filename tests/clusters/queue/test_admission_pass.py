"""The admission pass on the database: dry-run agreement, queue status, reclaim, usage.

No worker here: the pass is called directly, as the Celery task would, and the tests
read the rows and the API it feeds.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.utils import timezone

from clusters.domain.states import State
from clusters.models import ClusterEvent, ClusterRequest, UsageSpan
from clusters.queue.admission_pass import run_admission_pass
from clusters.requests import services
from clusters.rows import transition_metrics
from clusters.rows.spec import ClusterSpec
from clusters.rows.transitions import transition
from tenants.models import Quota

pytestmark = pytest.mark.django_db

CLUSTERS = "/api/v1/tenants/{}/clusters/"


def _quota(tenant: Any, flavor: Any, gpus: int, borrow: int = 0) -> None:
    Quota.objects.filter(tenant=tenant, flavor=flavor).update(gpus=gpus, borrow_limit=borrow)


def _roomy(*tenants: Any) -> None:
    for tenant in tenants:
        tenant.max_dev_clusters_per_user = 50
        tenant.max_dev_gpus_per_user = 50
        tenant.save()


def _ready(cluster: ClusterRequest) -> None:
    transition(cluster, State.PROVISIONING, reason="applied")
    transition(cluster, State.READY, reason="ready", ready_at=timezone.now())


def test_dry_run_agrees_with_the_next_pass(as_user: Any, bob: Any, acme: Any, h100: Any) -> None:
    _roomy(acme)
    _quota(acme, h100, gpus=2)
    api = as_user(bob)
    body = {"kind": "dev", "flavor": "h100", "workers": 2}
    verdict = api.post(CLUSTERS.format("acme") + "dry-run/", body, format="json").json()
    assert verdict["verdict"] == "fits_now"
    first = api.post(CLUSTERS.format("acme"), {**body, "name": "first"}, format="json")
    assert first.status_code == 201
    assert run_admission_pass().admitted == [ClusterRequest.objects.get(name="first").pk]

    verdict = api.post(CLUSTERS.format("acme") + "dry-run/", body, format="json").json()
    assert verdict["verdict"] == "will_queue"
    assert verdict["reasons"][0]["code"] == "tenant_quota"
    assert verdict["position"] == 1
    first_row = ClusterRequest.objects.get(name="first")
    # The only thing that frees acme's H100s is the first cluster's expiry.
    assert verdict["eta"] is not None
    assert (
        abs(
            (timezone.datetime.fromisoformat(verdict["eta"]) - first_row.expires_at).total_seconds()
        )
        < 60
    )

    api.post(CLUSTERS.format("acme"), {**body, "name": "second"}, format="json")
    assert run_admission_pass().admitted == []
    second = ClusterRequest.objects.get(name="second")
    assert second.state == "queued"
    assert second.queue_reason == "tenant_quota" and second.queue_position == 1
    assert "H100" in second.queue_message.upper()
    detail = api.get(CLUSTERS.format("acme") + "second/").json()
    assert detail["queue"]["reason"] == "tenant_quota"
    assert detail["queue"]["position"] == 1
    assert detail["queue"]["eta"] is not None


def test_never_fits_is_said_before_submitting(
    as_user: Any, alice: Any, acme: Any, h100: Any
) -> None:
    _quota(acme, h100, gpus=8, borrow=0)
    body = {"kind": "prod", "flavor": "h100", "workers": 2}
    verdict = as_user(alice).post(CLUSTERS.format("acme") + "dry-run/", body, format="json").json()
    assert verdict["verdict"] == "never_fits"
    assert verdict["reasons"][0]["code"] == "tenant_total"
    assert ClusterRequest.objects.count() == 0


def test_queue_endpoints_list_waiting_requests_in_order(
    as_user: Any, bob: Any, root: Any, charlie: Any, acme: Any, h100: Any
) -> None:
    _roomy(acme)
    _quota(acme, h100, gpus=1)
    for name in ("q-a", "q-b", "q-c"):
        services.cluster_request_create(
            actor=bob, tenant=acme, spec=ClusterSpec(name=name, kind="dev", flavor=h100, workers=1)
        )
    run_admission_pass()
    rows = as_user(bob).get("/api/v1/tenants/acme/queue/").json()["results"]
    assert [(r["name"], r["position"], r["reason"]) for r in rows] == [
        ("q-b", 1, "tenant_quota"),
        ("q-c", 2, "tenant_quota"),
    ]
    assert as_user(charlie).get("/api/v1/tenants/acme/queue/").status_code == 404
    assert as_user(bob).get("/api/v1/queue/").status_code == 403
    everything = as_user(root).get("/api/v1/queue/").json()["results"]
    assert [r["name"] for r in everything] == ["q-b", "q-c"]


def test_reclaim_warns_then_suspends_the_borrower_never_deletes(
    settings: Any, alice: Any, charlie: Any, acme: Any, globex: Any, h100: Any
) -> None:
    settings.RECLAIM_GRACE_SECONDS = 3600
    _roomy(acme, globex)
    _quota(acme, h100, gpus=8, borrow=8)
    _quota(globex, h100, gpus=8, borrow=0)
    h100.node_count = 2  # 16 GPUs in the fleet: acme borrowing 8 fills it
    h100.save()
    old = services.cluster_request_create(
        actor=alice, tenant=acme, spec=ClusterSpec(name="own", kind="prod", flavor=h100, workers=1)
    )
    borrowed = services.cluster_request_create(
        actor=alice,
        tenant=acme,
        spec=ClusterSpec(name="borrowed", kind="prod", flavor=h100, workers=1),
    )
    assert sorted(run_admission_pass().admitted) == sorted([old.pk, borrowed.pk])
    for row in ClusterRequest.objects.filter(pk__in=[old.pk, borrowed.pk]):
        _ready(row)

    need = services.cluster_request_create(
        actor=charlie,
        tenant=globex,
        spec=ClusterSpec(name="mine", kind="dev", flavor=h100, workers=8),
    )
    result = run_admission_pass()
    assert result.admitted == [] and result.suspended == []
    need.refresh_from_db()
    assert need.queue_reason == "reclaim_pending"
    victim = ClusterRequest.objects.get(pk=borrowed.pk)
    assert victim.reclaim_after is not None and victim.state == "ready"
    warning = ClusterEvent.objects.get(cluster=victim, reason="reclaim_warning")
    assert "suspended" in warning.message

    ClusterRequest.objects.filter(pk=victim.pk).update(
        reclaim_after=timezone.now() - timedelta(seconds=1)
    )
    result = run_admission_pass()
    assert result.suspended == [victim.pk]
    victim.refresh_from_db()
    assert victim.state == "suspended" and victim.holds_gpus is False
    assert ClusterRequest.objects.get(pk=old.pk).state == "ready"
    assert run_admission_pass().admitted == [need.pk]


def test_usage_reports_gpu_hours_per_user_and_flavor(
    as_user: Any, bob: Any, acme: Any, h100: Any
) -> None:
    _roomy(acme)
    cluster = services.cluster_request_create(
        actor=bob, tenant=acme, spec=ClusterSpec(name="u", kind="dev", flavor=h100, workers=2)
    )
    run_admission_pass()
    two_hours_ago = timezone.now() - timedelta(hours=2)
    UsageSpan.objects.filter(cluster=cluster).update(started_at=two_hours_ago)
    cluster.refresh_from_db()
    services.cluster_delete(actor=bob, cluster=cluster)
    # deleting keeps the GPUs until the pods are gone: the span is still open
    assert UsageSpan.objects.get(cluster=cluster).ended_at is None
    usage = as_user(bob).get("/api/v1/tenants/acme/usage/").json()
    assert usage["total_gpu_hours"] == pytest.approx(4.0, abs=0.01)
    # No idle time was seen (no activity reading): all of it counts as active.
    assert usage["by_user"] == [
        {
            "user": "bob",
            "gpu_hours": pytest.approx(4.0, abs=0.01),
            "active_gpu_hours": pytest.approx(4.0, abs=0.01),
            "idle_gpu_hours": 0.0,
            "cost": 0.0,  # no price set for the flavor (docs/cost.md)
        }
    ]
    assert usage["by_flavor"][0]["flavor"] == "h100"
    assert Decimal(str(usage["by_user_and_flavor"][0]["gpu_hours"])) > 3


def test_an_autoscaling_cluster_is_charged_for_its_largest_size(
    as_user: Any, alice: Any, bob: Any, acme: Any, h100: Any
) -> None:
    """Issue 10, item 14: workers=1, max_workers=4 on 8-GPU nodes may grow to 32 GPUs
    without asking, so the quota, the ledger and the dry-run all count 32."""
    _roomy(acme)
    _quota(acme, h100, gpus=24)
    api = as_user(alice)
    body = {"kind": "prod", "flavor": "h100", "workers": 1, "max_workers": 4}
    verdict = api.post(CLUSTERS.format("acme") + "dry-run/", body, format="json").json()
    assert verdict["verdict"] == "never_fits"
    assert verdict["reasons"][0]["code"] == "tenant_total"
    assert "32" in verdict["reasons"][0]["message"]

    _quota(acme, h100, gpus=32)
    verdict = api.post(CLUSTERS.format("acme") + "dry-run/", body, format="json").json()
    assert verdict["verdict"] == "fits_now"
    created = api.post(CLUSTERS.format("acme"), {**body, "name": "serve"}, format="json")
    assert created.status_code == 201, created.content
    assert created.json()["gpus"] == 32
    serve = ClusterRequest.objects.get(name="serve")
    assert run_admission_pass().admitted == [serve.pk]
    serve.refresh_from_db()
    # The RayCluster still starts at one worker and may grow to four.
    group = as_user(alice).get(CLUSTERS.format("acme") + "serve/manifests/").json()
    spec = group["manifests"][0]["spec"]["workerGroupSpecs"][0]
    assert (spec["replicas"], spec["maxReplicas"]) == (1, 4)
    assert serve.gpus == Decimal(32) and serve.holds_gpus
    assert UsageSpan.objects.get(cluster=serve).gpus == Decimal(32)

    # acme's 32 H100s are all charged: one more GPU must wait.
    services.cluster_request_create(
        actor=bob,
        tenant=acme,
        spec=ClusterSpec(name="one-more", kind="dev", flavor=h100, workers=1),
    )
    assert run_admission_pass().admitted == []
    waiting = ClusterRequest.objects.get(name="one-more")
    assert waiting.queue_reason == "tenant_quota"
    assert "32" in waiting.queue_message


def test_a_kueue_deployment_refuses_autoscaling(as_user: Any, alice: Any, settings: Any) -> None:
    """Kueue admits a RayCluster at one fixed size (its webhook refuses the in-tree
    autoscaler), so in Kueue mode an autoscaling request is a 400, not a failed cluster."""
    settings.QUEUE_MODE = "kueue"
    body = {"kind": "prod", "flavor": "h100", "workers": 1, "max_workers": 2, "name": "grow"}
    for url in (CLUSTERS.format("acme") + "dry-run/", CLUSTERS.format("acme")):
        response = as_user(alice).post(url, body, format="json")
        assert response.status_code == 400, response.content
        assert "Kueue" in response.json()["error"]["fields"]["max_workers"][0]
    assert ClusterRequest.objects.count() == 0
    fixed = as_user(alice).post(
        CLUSTERS.format("acme"), {**body, "max_workers": None, "workers": 2}, format="json"
    )
    assert fixed.status_code == 201, fixed.content


def test_the_earmark_is_kept_between_passes_and_cleared_on_admission(
    settings: Any, alice: Any, bob: Any, charlie: Any, acme: Any, globex: Any, h100: Any
) -> None:
    """Issue 10, item 16, on the database: the request a reclaim is for is marked, its
    tenant's dev request behind it is held, and once the borrower is suspended the prod
    request is admitted and the mark goes."""
    settings.RECLAIM_GRACE_SECONDS = 3600
    _roomy(acme, globex)
    _quota(acme, h100, gpus=16, borrow=0)
    _quota(globex, h100, gpus=16, borrow=16)
    own = services.cluster_request_create(
        actor=alice, tenant=acme, spec=ClusterSpec(name="own", kind="prod", flavor=h100, workers=1)
    )
    borrowed = [
        services.cluster_request_create(
            actor=charlie,
            tenant=globex,
            spec=ClusterSpec(name=f"g{i}", kind="dev", flavor=h100, workers=w),
        )
        for i, w in enumerate((8, 8, 4))
    ]
    assert len(run_admission_pass().admitted) == 4
    for row in ClusterRequest.objects.filter(state="admitted"):
        _ready(row)

    prod = services.cluster_request_create(
        actor=alice, tenant=acme, spec=ClusterSpec(name="need", kind="prod", flavor=h100, workers=1)
    )
    dev = services.cluster_request_create(
        actor=bob, tenant=acme, spec=ClusterSpec(name="bob-dev", kind="dev", flavor=h100, workers=1)
    )
    result = run_admission_pass()
    assert result.admitted == []
    prod.refresh_from_db()
    dev.refresh_from_db()
    assert prod.queue_reason == "reclaim_pending" and prod.earmarked_at is not None
    assert dev.queue_reason == "head_of_line" and dev.earmarked_at is None
    victim = ClusterRequest.objects.get(pk=borrowed[2].pk)
    assert victim.reclaim_after is not None

    ClusterRequest.objects.filter(pk=victim.pk).update(
        reclaim_after=timezone.now() - timedelta(seconds=1)
    )
    assert run_admission_pass().suspended == [victim.pk]
    assert run_admission_pass().admitted == [prod.pk]
    prod.refresh_from_db()
    assert prod.earmarked_at is None and prod.holds_gpus
    assert ClusterRequest.objects.get(pk=own.pk).state == "ready"
    dev.refresh_from_db()
    assert dev.state == "queued"


def _burst(count: int, tenant: Any, owner: Any, flavor: Any, start: int) -> list[int]:
    """``count`` dev requests of one single-GPU worker each, queued through the service."""
    return [
        services.cluster_request_create(
            actor=owner,
            tenant=tenant,
            spec=ClusterSpec(flavor=flavor, kind="dev", workers=1, name=f"burst-{start + i}"),
        ).pk
        for i in range(count)
    ]


def test_a_pass_admits_a_burst_in_a_constant_number_of_queries(
    bob: Any, acme: Any, h100: Any
) -> None:
    """Admitting 25 requests costs the queries of admitting 5 (the rows move together),
    and every admitted row still has its event and its usage span."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    _roomy(acme)
    _quota(acme, h100, gpus=32)
    counts = []
    admitted: list[int] = []
    for start, count in ((0, 5), (5, 25)):
        wanted = _burst(count, acme, bob, h100, start)
        # Both passes count cold: the metrics' labels are cached per process once read.
        transition_metrics._tenant_slugs.clear()
        transition_metrics._flavor_names.clear()
        with CaptureQueriesContext(connection) as queries:
            result = run_admission_pass()
        assert result.admitted == wanted  # in the order admission chose (the queue's)
        admitted += wanted
        counts.append(len(queries))
    assert counts[0] == counts[1], counts

    rows = ClusterRequest.objects.filter(pk__in=admitted)
    assert {row.state for row in rows} == {State.ADMITTED}
    assert all(row.holds_gpus and row.admitted_at and row.queue_position is None for row in rows)
    events = ClusterEvent.objects.filter(cluster__in=admitted, reason="admitted")
    assert sorted(events.values_list("cluster_id", flat=True)) == sorted(admitted)
    assert {(e.from_state, e.to_state, e.actor_name) for e in events} == {
        (State.QUEUED, State.ADMITTED, "system")
    }
    spans = UsageSpan.objects.filter(cluster__in=admitted, ended_at__isnull=True)
    assert sorted(spans.values_list("cluster_id", flat=True)) == sorted(admitted)
    assert {(s.username, s.flavor_name, s.kind, s.gpus) for s in spans} == {
        ("bob", "h100", "dev", Decimal(1))
    }
