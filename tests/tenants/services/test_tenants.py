"""tenants.services.tenants: tenants created and changed by platform admins, and the part
of the policy a tenant's own admins may change."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from tenants.models import AuditEvent, Tenant, tenant_namespace
from tenants.services import tenant_create, tenant_policy_update, tenant_update


def test_a_tenants_namespace_is_derived_from_its_slug_and_nothing_else(root: Any) -> None:
    tenant = tenant_create(actor=root, slug="vision", name="Vision")
    assert tenant.namespace == tenant_namespace("vision")
    with pytest.raises(ValidationError) as refused:
        tenant_create(actor=root, slug="speech", name="Speech", namespace="kube-system")
    assert "namespace" in refused.value.message_dict
    assert not Tenant.objects.filter(slug="speech").exists()


def test_slug_and_namespace_never_change_and_a_zero_budget_is_refused(root: Any, acme: Any) -> None:
    with pytest.raises(ValidationError) as refused:
        tenant_update(actor=root, tenant=acme, changes={"slug": "acme2", "weight": 2})
    assert set(refused.value.message_dict) == {"slug"}
    with pytest.raises(ValidationError) as budget:
        tenant_update(actor=root, tenant=acme, changes={"monthly_gpu_hour_budget": 0})
    assert "monthly_gpu_hour_budget" in budget.value.message_dict
    tenant_update(actor=root, tenant=acme, changes={"name": "Acme Labs"})
    assert Tenant.objects.get(pk=acme.pk).name == "Acme Labs"
    event = AuditEvent.objects.get(action="tenant.update")
    assert event.tenant == acme and event.data["before"] == {"name": "Acme Research"}


def test_a_tenant_admin_changes_the_policy_within_the_platforms_maximum(
    alice: Any, acme: Any
) -> None:
    tenant_policy_update(actor=alice, tenant=acme, changes={"dev_ttl_hours": 4})
    assert Tenant.objects.get(pk=acme.pk).dev_ttl_hours == 4
    with pytest.raises(ValidationError, match="maximum TTL"):
        tenant_policy_update(actor=alice, tenant=acme, changes={"dev_ttl_hours": 10_000})
    with pytest.raises(ValidationError) as platform_only:
        tenant_policy_update(actor=alice, tenant=acme, changes={"max_ttl_hours": 1000})
    assert "max_ttl_hours" in platform_only.value.message_dict
    assert AuditEvent.objects.filter(action="tenant.policy").count() == 1


def test_engineers_change_no_policy_and_tenant_admins_no_tenant(
    alice: Any, bob: Any, acme: Any
) -> None:
    with pytest.raises(PermissionDenied):
        tenant_policy_update(actor=bob, tenant=acme, changes={"dev_ttl_hours": 4})
    with pytest.raises(PermissionDenied):
        tenant_update(actor=alice, tenant=acme, changes={"name": "Mine"})
