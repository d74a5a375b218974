"""A reconcile pass costs the same number of Kubernetes LISTs and database queries
whatever the number of clusters: one LIST per kind and bulk row writes."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from typing import Any

from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from clusters.domain.states import State
from clusters.domain.workload_kinds import kinds
from clusters.engine import provisioning
from clusters.engine.reconciler import reconcile_once
from clusters.kinds.raycluster.engine import delete_object as delete_raycluster
from clusters.kube.gateway import Gateway, get_gateway
from clusters.models import ClusterEvent, ClusterRequest, UsageSpan
from clusters.rows import transition_metrics
from tests.factories import QuotaFactory, TenantFactory

# A steady pass LISTs each workload kind's objects, then pods, nodes, namespaces and
# scheduling events.
_LISTS_PER_PASS = len(kinds()) + 4


@contextmanager
def kube_requests() -> Iterator[Counter[str]]:
    """Count the gateway's HTTP requests by method (they still go to kubesim)."""
    seen: Counter[str] = Counter()
    original = Gateway._call

    def counting(self: Gateway, method: str, path: str, **kwargs: Any) -> Any:
        seen[method] += 1
        return original(self, method, path, **kwargs)

    Gateway._call = counting  # type: ignore[method-assign]
    try:
        yield seen
    finally:
        Gateway._call = original  # type: ignore[method-assign]


def _provisioning_clusters(count: int, tenant: Any, owner: Any, flavor: Any) -> None:
    """``count`` dev clusters in ``provisioning``, their RayClusters applied to kubesim;
    ``tenant`` may be a list, over which the clusters are spread."""
    tenants = tenant if isinstance(tenant, list) else [tenant]
    ClusterRequest.objects.bulk_create(
        ClusterRequest(
            tenant=tenants[i % len(tenants)],
            owner=owner,
            name=f"cost-{i}",
            kind="dev",
            flavor=flavor,
            workers=1,
            gpus=Decimal(1),
            cpu=Decimal(26),
            memory_gib=Decimal(233),
            state=State.PROVISIONING,
            holds_gpus=True,
            admitted_at=timezone.now(),
        )
        for i in range(count)
    )
    gw = get_gateway()
    for row in ClusterRequest.objects.select_related("tenant", "flavor", "owner"):
        provisioning.apply_cluster(row, gw)


def _pass() -> tuple[Counter[str], int, Any]:
    # Each pass counts cold: the metrics' labels are cached per process once read.
    transition_metrics._tenant_slugs.clear()
    transition_metrics._flavor_names.clear()
    with kube_requests() as calls, CaptureQueriesContext(connection) as queries:
        report = reconcile_once()
    return calls, len(queries), report


def _cost(count: int, tenant: Any, owner: Any, flavor: Any) -> dict[str, Any]:
    ClusterRequest.objects.all().delete()
    _provisioning_clusters(count, tenant, owner, flavor)
    first_calls, first_queries, first = _pass()
    steady_calls, steady_queries, steady = _pass()
    assert len(first.ready) == count, first
    assert not steady.ready and not steady.recreated and not steady.errors
    return {
        "first": (dict(first_calls), first_queries),
        "steady": (dict(steady_calls), steady_queries),
    }


def test_a_pass_costs_the_same_for_2_and_20_clusters(
    kubesim: Any, acme: Any, globex: Any, bob: Any, h100: Any
) -> None:
    initech = TenantFactory(slug="initech", name="Initech")
    QuotaFactory(tenant=initech, flavor=h100, gpus=16, borrow_limit=0)
    small = _cost(2, [acme, globex], bob, h100)
    # Spread over one more tenant: keeping each tenant's namespace bundle reads no quota
    # rows of its own (they are read for every tenant at once).
    large = _cost(20, [acme, globex, initech], bob, h100)

    assert small == large
    # One LIST per kind (each workload kind's objects, pods, nodes, namespaces, scheduling
    # events) and nothing else: no GET per cluster, no write when nothing changed.
    assert large["steady"][0] == {"GET": _LISTS_PER_PASS}
    # The 20 rows that became ready were moved together, each with its event.
    assert ClusterRequest.objects.filter(state=State.READY).count() == 20
    assert ClusterEvent.objects.filter(reason="ready").count() == 20


def test_the_pass_asks_the_api_server_for_scheduling_failures_only(
    kubesim: Any, acme: Any, bob: Any, h100: Any
) -> None:
    _provisioning_clusters(3, acme, bob, h100)
    gw = get_gateway()
    # Every bound pod has a Scheduled event; none failed to schedule.
    assert gw.list("v1", "Event", field_selector="reason=Scheduled")
    paths: list[tuple[str, str]] = []
    original = Gateway._call

    def recording(self: Gateway, method: str, path: str, **kwargs: Any) -> Any:
        paths.append((path, str(kwargs.get("query"))))
        return original(self, method, path, **kwargs)

    Gateway._call = recording  # type: ignore[method-assign]
    try:
        reconcile_once()
    finally:
        Gateway._call = original  # type: ignore[method-assign]
    (events_query,) = [q for path, q in paths if path.endswith("/events")]
    assert "reason=FailedScheduling" in events_query


def _deleting_clusters(count: int, tenant: Any, owner: Any, flavor: Any) -> None:
    """``count`` dev clusters in ``deleting`` whose objects are gone, still holding their
    GPUs with an open usage span (what a pass finishes)."""
    _provisioning_clusters(count, tenant, owner, flavor)
    now = timezone.now()
    rows = list(ClusterRequest.objects.all())
    UsageSpan.objects.bulk_create(
        UsageSpan(
            tenant_id=row.tenant_id,
            cluster_id=row.pk,
            username=owner.get_username(),
            flavor_name=flavor.name,
            kind=row.kind,
            gpus=row.gpus,
            started_at=now,
        )
        for row in rows
    )
    gw = get_gateway()
    for row in rows:
        delete_raycluster(gw, row.namespace, row.name)
    ClusterRequest.objects.update(state=State.DELETING, deletion_reason="expired")


def _deletion_cost(count: int, tenant: Any, owner: Any, flavor: Any) -> tuple[Any, int]:
    ClusterRequest.objects.all().delete()
    _deleting_clusters(count, tenant, owner, flavor)
    calls, queries, report = _pass()
    assert sorted(report.deleted) == sorted(ClusterRequest.objects.values_list("pk", flat=True))
    assert report.freed_capacity
    return dict(calls), queries


def test_finishing_deletions_costs_the_same_for_2_and_20_clusters(
    kubesim: Any, acme: Any, bob: Any, h100: Any
) -> None:
    assert _deletion_cost(2, acme, bob, h100) == _deletion_cost(20, acme, bob, h100)
    # Every row of the second pass moved, gave its GPUs back and closed its usage span,
    # as transition() does one row at a time.
    rows = ClusterRequest.objects.all()
    assert {(r.state, r.holds_gpus, r.gpus_released_at is not None) for r in rows} == {
        (State.DELETED, False, True)
    }
    assert not UsageSpan.objects.filter(ended_at__isnull=True).exists()
    assert ClusterEvent.objects.filter(reason="expired", to_state=State.DELETED).count() == 20


def _settled(count: int, tenant: Any, owner: Any, flavor: Any) -> list[int]:
    """``count`` ready clusters, folded by a pass that changed nothing: the next pass may
    skip them all. Returns their ids."""
    _provisioning_clusters(count, tenant, owner, flavor)
    assert len(reconcile_once().ready) == count  # moves them: their rows changed
    settling = reconcile_once()
    assert (settling.folded, settling.skipped) == (count, 0)
    return sorted(ClusterRequest.objects.values_list("pk", flat=True))


def test_a_steady_pass_folds_no_row_and_still_lists_every_kind(
    kubesim: Any, acme: Any, bob: Any, h100: Any
) -> None:
    _settled(20, acme, bob, h100)
    with kube_requests() as calls, CaptureQueriesContext(connection) as queries:
        steady = reconcile_once()
    assert (steady.folded, steady.skipped) == (0, 20)
    # The LISTs are what tells it nothing changed (resourceVersions), and the rows' stamps
    # are one light query: no row is loaded whole (``image`` is read by no stamp).
    assert dict(calls) == {"GET": _LISTS_PER_PASS}
    assert not [q for q in queries.captured_queries if '"image"' in q["sql"]]
    assert any('"image"' in q["sql"] for q in _full_pass_queries())
    assert not steady.ready and not steady.errors
    assert ClusterRequest.objects.filter(state=State.READY).count() == 20


def _full_pass_queries() -> list[dict[str, Any]]:
    from clusters.engine import foldmemo

    foldmemo.MEMO.clear()
    with CaptureQueriesContext(connection) as queries:
        assert reconcile_once().skipped == 0
    return queries.captured_queries


def test_a_changed_row_is_folded_alone(kubesim: Any, acme: Any, bob: Any, h100: Any) -> None:
    pks = _settled(5, acme, bob, h100)
    # Written as any code path might write it (no save(), no event): the row's stamp
    # moves all the same.
    ClusterRequest.objects.filter(pk=pks[2]).update(workers=2)
    report = reconcile_once()
    assert (report.folded, report.skipped) == (1, 4)
    assert ClusterRequest.objects.get(pk=pks[2]).state == State.PROVISIONING  # degraded
    assert ClusterRequest.objects.filter(state=State.READY).count() == 4


def test_a_changed_object_gets_its_row_folded(kubesim: Any, acme: Any, bob: Any, h100: Any) -> None:
    pks = _settled(5, acme, bob, h100)
    row = ClusterRequest.objects.select_related("tenant").get(pk=pks[0])
    delete_raycluster(get_gateway(), row.namespace, row.name)
    report = reconcile_once()
    assert report.folded == 1 and report.skipped == 4
    assert report.recreated == [row.pk]


def test_a_fold_that_failed_is_not_skipped_by_the_next_pass(
    kubesim: Any, acme: Any, bob: Any, h100: Any
) -> None:
    pks = _settled(3, acme, bob, h100)
    row = ClusterRequest.objects.select_related("tenant").get(pk=pks[1])
    delete_raycluster(get_gateway(), row.namespace, row.name)
    kubesim.set_faults(rate=1.0, codes=(422,), methods=("PATCH", "POST", "PUT"))
    try:
        failed = reconcile_once()
    finally:
        kubesim.clear_faults()
    assert failed.errors and not failed.recreated
    # Nothing changed since (the RayCluster is still missing, the row as it was): the
    # same stamps, but the row was not settled, so it is folded again.
    again = reconcile_once()
    assert again.folded == 1 and again.recreated == [row.pk]


def test_a_full_pass_folds_every_row_again(
    kubesim: Any, acme: Any, bob: Any, h100: Any, settings: Any
) -> None:
    _settled(4, acme, bob, h100)
    settings.RECONCILE_FULL_PASS_SECONDS = 0
    report = reconcile_once()
    assert (report.folded, report.skipped) == (4, 0)


def test_jobs_are_folded_only_when_their_row_run_or_objects_changed(
    kubesim: Any, acme: Any, bob: Any, as_user: Any
) -> None:
    from clusters import tasks
    from clusters.models import Job

    acme.max_dev_clusters_per_user = acme.max_dev_gpus_per_user = 10
    acme.save()
    client = as_user(bob)
    for name in ("j0", "j1", "j2"):
        body = {"entrypoint": "python train.py", "flavor": "h100", "workers": 1, "name": name}
        assert client.post("/api/v1/tenants/acme/jobs/", body, format="json").status_code == 201
    assert tasks.provision_requested() == 3  # their RayJobs, suspended while they wait
    first = reconcile_once()
    assert first.folded == 3 and not first.errors
    steady = reconcile_once()
    assert (steady.folded, steady.skipped) == (0, 3)

    # The run's row is an input of a job's fold: a write to it alone gets the job folded
    # (a column the fold reads: inside the test's one transaction, xmin stays the same).
    j1 = ClusterRequest.objects.get(name="j1")
    Job.objects.filter(pk=j1.pk).update(job_status="PENDING")
    assert (reconcile_once().folded, reconcile_once().folded) == (1, 0)

    # So are its objects: a RayJob that somebody deleted gets its job, alone, folded.
    get_gateway().delete("ray.io/v1", "RayJob", "j2", j1.namespace)
    again = reconcile_once()
    assert (again.folded, again.skipped) == (1, 2)


def test_an_object_missing_from_lists_older_than_its_row_is_left_to_the_next_pass(
    kubesim: Any, acme: Any, bob: Any, h100: Any
) -> None:
    from datetime import timedelta

    _provisioning_clusters(2, acme, bob, h100)
    fresh, deleting = ClusterRequest.objects.order_by("pk")
    gw = get_gateway()
    for row in (fresh, deleting):
        delete_raycluster(gw, row.namespace, row.name)
    # Both moved after the pass's LISTs began (a batch moved them once it had applied,
    # or deleted, their RayClusters): a LIST that lacks their RayCluster says nothing.
    later = timezone.now() + timedelta(minutes=1)
    ClusterRequest.objects.filter(pk=fresh.pk).update(progress_at=later)
    ClusterRequest.objects.filter(pk=deleting.pk).update(
        state=State.DELETING, deletion_reason="deleted", progress_at=later
    )
    for _ in range(2):  # and a deferred row is not remembered as settled
        report = reconcile_once()
        assert sorted(report.deferred) == sorted([fresh.pk, deleting.pk])
        assert not report.recreated and not report.deleted
    assert gw.get("ray.io/v1", "RayCluster", fresh.name, fresh.namespace) is None
    # A row waiting for its provision pass is left to it, whenever it moved.
    earlier = timezone.now() - timedelta(minutes=1)
    ClusterRequest.objects.filter(pk=deleting.pk).update(
        progress_at=earlier, provision_requested_at=earlier
    )
    ClusterRequest.objects.filter(pk=fresh.pk).update(progress_at=earlier)
    report = reconcile_once()
    assert report.deferred == [deleting.pk] and report.recreated == [fresh.pk]
    ClusterRequest.objects.filter(pk=deleting.pk).update(provision_requested_at=None)
    assert reconcile_once().deleted == [deleting.pk]


def test_a_jobs_submitter_is_found_in_the_pods_a_pass_read(kubesim: Any, make_cluster: Any) -> None:
    from clusters.kinds.rayjob import engine as jobs

    row = make_cluster(name="train")
    submitter = {
        "metadata": {"name": "train-submit", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"containers": [{"name": jobs.SUBMITTER_CONTAINER}]},
    }
    ray_head = {"metadata": {"name": "train-head"}, "spec": {"containers": [{"name": "ray"}]}}
    gw = get_gateway()
    with kube_requests() as calls:
        assert jobs.submitter_pod(row, gw, [ray_head, submitter]) is submitter
    assert not calls  # no LIST of the job's pods: the pass had them
    with kube_requests() as calls:
        # Pods read before the submitter was: the API server is asked (it has none here).
        assert jobs.submitter_pod(row, gw, [ray_head]) is None
    assert calls == {"GET": 1}


def test_a_jobs_rayjob_suspended_or_not_against_its_rows_state_is_applied_again(
    kubesim: Any, acme: Any, bob: Any, as_user: Any
) -> None:
    """Two writes of a RayJob raced (a provision pass that read the job waiting applied it
    suspended after the batch that admitted it had unsuspended it): the fold repairs it."""
    from clusters import tasks

    acme.max_dev_clusters_per_user = acme.max_dev_gpus_per_user = 10
    acme.save()
    client = as_user(bob)
    for name in ("started", "waiting"):
        body = {"entrypoint": "python train.py", "flavor": "h100", "workers": 1, "name": name}
        assert client.post("/api/v1/tenants/acme/jobs/", body, format="json").status_code == 201
    assert tasks.provision_requested() == 2  # their RayJobs, suspended while they wait
    gw = get_gateway()

    def suspended(name: str) -> bool:
        rayjob = gw.get("ray.io/v1", "RayJob", name, "gw-acme")
        assert rayjob is not None
        return bool(rayjob["spec"].get("suspend"))

    assert suspended("started") and suspended("waiting")
    # The row moved on to starting, but the last write of its RayJob was the suspended
    # one; and a waiting job's RayJob was unsuspended behind the queue's back.
    ClusterRequest.objects.filter(name="started").update(state=State.STARTING, holds_gpus=True)
    gw.merge_patch("ray.io/v1", "RayJob", "waiting", {"spec": {"suspend": False}}, "gw-acme")
    report = reconcile_once()
    assert not report.errors
    assert not suspended("started") and suspended("waiting")
    # Repaired, they stay so: the next pass writes nothing.
    with kube_requests() as calls:
        reconcile_once()
    assert not calls["PATCH"] and not calls["POST"] and not calls["PUT"]
