"""Archiving and restoring a tenant (clusters.requests.tenancy): platform admins only,
and never while the tenant still holds or waits for GPUs."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import PermissionDenied

from clusters.domain.states import State
from clusters.requests.tenancy import tenant_archive, tenant_holdings, tenant_restore
from controlplane.exceptions import ServiceConflict
from tenants.models import AuditEvent, Tenant

pytestmark = pytest.mark.django_db


def test_holdings_count_live_and_deleting_requests_per_state(make_cluster: Any) -> None:
    make_cluster(name="a").save()
    make_cluster(name="b").save()
    make_cluster(name="c", state=State.DELETING).save()
    make_cluster(name="d", state=State.DELETED).save()
    make_cluster(name="e", state=State.FAILED).save()
    assert tenant_holdings(make_cluster().tenant) == {"queued": 2, "deleting": 1}


def test_only_a_platform_admin_archives(acme: Any, alice: Any) -> None:
    with pytest.raises(PermissionDenied):
        tenant_archive(actor=alice, tenant=acme)  # a tenant admin is not enough
    assert Tenant.objects.get(pk=acme.pk).archived_at is None


def test_a_tenant_with_requests_is_not_archived(make_cluster: Any, root: Any) -> None:
    cluster = make_cluster()
    cluster.save()
    with pytest.raises(ServiceConflict) as refused:
        tenant_archive(actor=root, tenant=cluster.tenant)
    assert refused.value.code == "tenant_not_empty"
    assert "(1 queued)" in refused.value.message
    assert Tenant.objects.get(pk=cluster.tenant.pk).archived_at is None


def test_archive_and_restore_are_audited_once_each(acme: Any, root: Any) -> None:
    archived = tenant_archive(actor=root, tenant=acme)
    assert archived.archived_at is not None
    assert tenant_archive(actor=root, tenant=acme).archived_at == archived.archived_at
    restored = tenant_restore(actor=root, tenant=acme)
    assert restored.archived_at is None
    assert tenant_restore(actor=root, tenant=acme).archived_at is None
    actions = list(AuditEvent.objects.order_by("pk").values_list("action", flat=True))
    assert actions == ["tenant.archive", "tenant.restore"]
