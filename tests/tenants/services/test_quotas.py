"""tenants.services.quotas: a tenant's whole quota replaced at once by a platform admin,
audited before and after."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from tenants.models import AuditEvent, Quota, Tenant
from tenants.services import QuotaLine, quota_set


def test_the_quota_is_replaced_whole_and_flavors_left_out_lose_theirs(root: Any, acme: Any) -> None:
    quota_set(
        actor=root,
        tenant=acme,
        flavors=[QuotaLine(flavor="h100", gpus=4, borrow_limit=2, lend_limit=1)],
        cpu=64,
        memory_gib=512,
    )
    assert list(Quota.objects.filter(tenant=acme).values_list("flavor__name", "gpus")) == [
        ("h100", 4)
    ]
    tenant = Tenant.objects.get(pk=acme.pk)
    assert (tenant.cpu_quota, tenant.memory_quota_gib) == (64, 512)
    event = AuditEvent.objects.get(action="quota.set")
    assert [line["flavor"] for line in event.data["before"]["flavors"]] == ["h100", "l4"]
    assert event.data["after"]["flavors"] == [
        {"flavor": "h100", "gpus": 4, "borrow_limit": 2, "lend_limit": 1}
    ]


def test_every_bad_line_is_named_and_nothing_changes(root: Any, acme: Any) -> None:
    before = list(Quota.objects.filter(tenant=acme).values("flavor", "gpus"))
    with pytest.raises(ValidationError) as refused:
        quota_set(
            actor=root,
            tenant=acme,
            flavors=[
                QuotaLine(flavor="nope", gpus=1),
                QuotaLine(flavor="h100", gpus=2, lend_limit=3),
                QuotaLine(flavor="h100", gpus=2),
            ],
            cpu=1,
            memory_gib=1,
        )
    assert set(refused.value.message_dict) == {
        "flavors.0.flavor",
        "flavors.1.lend_limit",
        "flavors.2.flavor",
    }
    assert list(Quota.objects.filter(tenant=acme).values("flavor", "gpus")) == before


def test_a_tenant_admin_sets_no_quota(alice: Any, acme: Any) -> None:
    with pytest.raises(PermissionDenied):
        quota_set(actor=alice, tenant=acme, flavors=[], cpu=1, memory_gib=1)
