"""Unit tests of the request services and the rules they share (clusters.requests,
clusters.requests.rules, clusters.rows.lifecycle), against PostgreSQL; no worker runs, so
after-commit nudges only leave messages behind."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from django.core.exceptions import PermissionDenied

from clusters.domain.states import State
from clusters.models import ClusterRequest
from clusters.requests import rules, services
from clusters.rows.spec import ClusterSpec
from clusters.rows.transitions import transition
from controlplane.exceptions import ServiceConflict
from tenants.models import AuditEvent

pytestmark = pytest.mark.django_db(transaction=True)


def _create(actor: Any, tenant: Any, flavor: Any, **fields: Any) -> ClusterRequest:
    return services.cluster_request_create(
        actor=actor, tenant=tenant, spec=ClusterSpec(flavor=flavor, **fields)
    )


def _running(cluster: ClusterRequest) -> ClusterRequest:
    assert transition(cluster, State.ADMITTED, reason="admitted")
    assert transition(cluster, State.PROVISIONING, reason="applied")
    return cluster


def test_only_the_owner_or_a_tenant_admin_manages_a_cluster(
    acme: Any, alice: Any, bob: Any, vera: Any, h100: Any
) -> None:
    cluster = _create(bob, acme, h100, name="mine")
    assert rules.can_manage(actor=bob, cluster=cluster)
    assert rules.can_manage(actor=alice, cluster=cluster)
    assert not rules.can_manage(actor=vera, cluster=cluster)
    with pytest.raises(PermissionDenied):
        services.cluster_delete(actor=vera, cluster=cluster)
    assert ClusterRequest.objects.get(pk=cluster.pk).state == State.QUEUED


def test_deleting_twice_is_one_deletion_and_one_audit_record(
    acme: Any, bob: Any, h100: Any
) -> None:
    cluster = _create(bob, acme, h100, name="twice")
    services.cluster_delete(actor=bob, cluster=cluster)
    again = services.cluster_delete(actor=bob, cluster=cluster)
    assert again.state == State.DELETING
    assert AuditEvent.objects.filter(action="cluster.delete").count() == 1


def test_a_queued_cluster_cannot_be_suspended(acme: Any, bob: Any, h100: Any) -> None:
    cluster = _create(bob, acme, h100, name="waiting")
    with pytest.raises(ServiceConflict) as caught:
        services.cluster_suspend(actor=bob, cluster=cluster)
    assert caught.value.code == "invalid_state"


def test_suspend_then_resume_goes_back_through_the_queue(acme: Any, bob: Any, h100: Any) -> None:
    cluster = _running(_create(bob, acme, h100, name="pause"))
    suspended = services.cluster_suspend(actor=bob, cluster=cluster)
    assert (suspended.state, suspended.holds_gpus) == (State.SUSPENDED, False)
    resumed = services.cluster_resume(actor=bob, cluster=suspended)
    assert resumed.state == State.QUEUED


def test_a_suspended_cluster_at_the_cap_can_be_resumed(acme: Any, bob: Any, h100: Any) -> None:
    """It already counts against its owner's caps, so resuming takes nothing more."""
    acme.max_dev_clusters_per_user = 1
    acme.save()
    cluster = _running(_create(bob, acme, h100, name="only"))
    services.cluster_suspend(actor=bob, cluster=cluster)
    with pytest.raises(ServiceConflict) as caught:
        _create(bob, acme, h100, name="second")  # the suspended one counts
    assert caught.value.code == "user_cap"
    assert services.cluster_resume(actor=bob, cluster=cluster).state == State.QUEUED


def test_queued_requests_count_against_the_cap_at_create(acme: Any, bob: Any, h100: Any) -> None:
    acme.max_dev_clusters_per_user = 2
    acme.max_dev_gpus_per_user = 3
    acme.save()
    _create(bob, acme, h100, name="one")
    _create(bob, acme, h100, name="two", workers=2)
    assert rules.owner_dev_usage(tenant=acme, owner=bob) == (2, Decimal(3))
    with pytest.raises(ServiceConflict) as caught:
        _create(bob, acme, h100, name="three")
    assert "already have 2 dev clusters" in caught.value.message


def test_extend_refuses_a_cluster_without_a_ttl(acme: Any, alice: Any, h100: Any) -> None:
    cluster = _running(_create(alice, acme, h100, name="serve", kind="prod"))
    assert cluster.ttl_hours is None
    with pytest.raises(ServiceConflict) as caught:
        services.cluster_extend(actor=alice, cluster=cluster, hours=2)
    assert caught.value.code == "no_ttl"


def test_owner_dev_usage_counts_what_the_orm_query_counts(
    acme: Any, globex: Any, bob: Any, alice: Any, h100: Any
) -> None:
    """The caps' usage is plain SQL (it runs under the tenant lock of every create): it
    must count exactly the rows the ORM's expression of the rule counts."""
    from django.db.models import Count, Sum

    from clusters.models import Job

    rows = []
    for tenant in (acme, globex):
        for owner in (bob, alice):
            for kind in ("dev", "prod"):
                for state in State:
                    rows.append(
                        ClusterRequest.objects.create(
                            tenant=tenant,
                            owner=owner,
                            name=f"{owner.username}-{kind}-{state}",
                            kind=kind,
                            flavor=h100,
                            workers=1,
                            gpus=Decimal("1.5") if kind == "dev" else 8,
                            state=state,
                        )
                    )
    host = next(r for r in rows if r.kind == "dev" and r.state == State.READY)
    hosted = next(r for r in rows if r.kind == "dev" and r.state == State.QUEUED)
    Job.objects.create(request=hosted, entrypoint="python a.py", host=host)
    alone = next(r for r in rows if r.kind == "dev" and r.state == State.ADMITTED)
    Job.objects.create(request=alone, entrypoint="python b.py")

    def by_orm(tenant: Any, owner: Any, excluding: int | None) -> tuple[int, Decimal]:
        found = (
            ClusterRequest.objects.unscoped()
            .live()
            .filter(tenant=tenant, owner=owner, kind="dev")
            .exclude(job__host__isnull=False)
            .exclude(pk=excluding if excluding is not None else -1)
            .aggregate(n=Count("id"), g=Sum("gpus"))
        )
        return int(found["n"] or 0), Decimal(found["g"] or 0)

    for tenant in (acme, globex):
        for owner in (bob, alice):
            for excluding in (None, host.pk, hosted.pk, alone.pk):
                expected = by_orm(tenant, owner, excluding)
                got = rules.owner_dev_usage(tenant=tenant, owner=owner, excluding=excluding)
                assert got == expected, (tenant, owner, excluding)
    assert rules.owner_dev_usage(tenant=acme, owner=bob)[0] > 0


def test_a_create_waits_for_the_tenants_lock_and_then_counts_what_committed_before_it(
    acme: Any, bob: Any, h100: Any
) -> None:
    """Two creates by one engineer with room for one more dev cluster: the second waits
    on the tenant's row lock (seen in PostgreSQL's own lock waits, not by timing) and,
    once the first commits, is refused by the cap instead of slipping under it."""
    import threading
    import time

    from django.db import connection, connections, transaction

    from tenants.models import Tenant

    Tenant.objects.filter(pk=acme.pk).update(max_dev_clusters_per_user=1)
    acme.refresh_from_db()
    outcome: dict[str, Any] = {}

    def second() -> None:
        try:
            _create(bob, acme, h100, name="second", kind="dev")
            outcome["second"] = "created"
        except Exception as exc:  # noqa: BLE001 - the test reads what the thread met
            outcome["second"] = repr(exc)
        finally:
            connections.close_all()

    with transaction.atomic():
        Tenant.objects.lock(acme.pk)
        waiter = threading.Thread(target=second)
        waiter.start()
        deadline = time.monotonic() + 30
        with connection.cursor() as cursor:
            while True:
                # Statistics are read once per transaction unless the snapshot is cleared.
                cursor.execute("SELECT pg_stat_clear_snapshot()")
                cursor.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                    "AND datname = current_database()"
                )
                if cursor.fetchone()[0] == 1:
                    break
                assert time.monotonic() < deadline, f"the second create never waited: {outcome}"
                time.sleep(0.05)
        assert "second" not in outcome
        _create(bob, acme, h100, name="first", kind="dev")
    waiter.join(timeout=30)
    assert outcome["second"] == (
        "ServiceConflict('You already have 1 dev cluster in acme; the limit is 1. "
        "Delete one first.')"
    )
    assert list(ClusterRequest.objects.values_list("name", flat=True)) == ["first"]
