"""Unit tests of the request services and the rules they share (clusters.requests,
clusters.rules, clusters.lifecycle), against PostgreSQL; no worker runs, so after-commit
nudges only leave messages behind."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from django.core.exceptions import PermissionDenied

from clusters import rules
from clusters.models import ClusterRequest
from clusters.requests import services
from clusters.spec import ClusterSpec
from clusters.states import State
from clusters.transitions import transition
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
