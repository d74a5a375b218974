"""tenants.services.members: members added, re-roled and removed by the tenant's admins,
never above the actor's own rank, never leaving a tenant without an admin."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from controlplane.exceptions import ServiceConflict
from tenants.models import AuditEvent, Membership, MembershipSource, Role
from tenants.services import membership_add, membership_remove, membership_set_role
from tests.factories import UserFactory


def test_a_tenant_admin_adds_a_user_once(alice: Any, acme: Any) -> None:
    UserFactory(username="dana")
    membership = membership_add(actor=alice, tenant=acme, username="dana", role=Role.ENGINEER)
    assert membership.role == Role.ENGINEER
    assert AuditEvent.objects.get(action="membership.add").data == {
        "username": "dana",
        "role": "engineer",
    }
    with pytest.raises(ValidationError, match="already a member"):
        membership_add(actor=alice, tenant=acme, username="dana", role=Role.VIEWER)
    with pytest.raises(ValidationError, match="No user named"):
        membership_add(actor=alice, tenant=acme, username="nobody", role=Role.VIEWER)


def test_engineers_manage_no_members_and_nobody_crosses_tenants(
    bob: Any, charlie: Any, acme: Any
) -> None:
    UserFactory(username="dana")
    with pytest.raises(PermissionDenied):
        membership_add(actor=bob, tenant=acme, username="dana", role=Role.VIEWER)
    with pytest.raises(PermissionDenied):
        membership_add(actor=charlie, tenant=acme, username="dana", role=Role.VIEWER)
    assert not Membership.objects.filter(user__username="dana").exists()


def test_the_last_admin_keeps_the_role_and_the_membership(alice: Any, acme: Any) -> None:
    own = Membership.objects.get(tenant=acme, user=alice)
    with pytest.raises(ServiceConflict) as demoted:
        membership_set_role(actor=alice, membership=own, role=Role.VIEWER)
    assert demoted.value.code == "last_admin"
    assert "make another member admin first" in demoted.value.message
    with pytest.raises(ServiceConflict) as removed:
        membership_remove(actor=alice, membership=own)
    assert removed.value.code == "conflict" and "add another admin first" in removed.value.message
    assert Membership.objects.get(pk=own.pk).role == Role.ADMIN


def test_a_second_admin_lets_the_first_step_down(alice: Any, bob: Any, acme: Any) -> None:
    bobs = Membership.objects.get(tenant=acme, user=bob)
    membership_set_role(actor=alice, membership=bobs, role=Role.ADMIN)
    alices = Membership.objects.get(tenant=acme, user=alice)
    membership_remove(actor=bob, membership=alices)
    assert not Membership.objects.filter(pk=alices.pk).exists()
    assert AuditEvent.objects.get(action="membership.role").data == {
        "username": "bob",
        "before": "engineer",
        "after": "admin",
    }


def test_a_role_from_the_identity_provider_is_changed_there(
    alice: Any, bob: Any, acme: Any
) -> None:
    bobs = Membership.objects.get(tenant=acme, user=bob)
    Membership.objects.filter(pk=bobs.pk).update(source=MembershipSource.PROVIDER)
    with pytest.raises(ServiceConflict) as refused:
        membership_set_role(actor=alice, membership=bobs, role=Role.VIEWER)
    assert refused.value.code == "managed_by_provider"
