"""tenants.services.users: accounts created, deactivated and made platform admins, each
audited, with the last active platform admin always kept."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied, ValidationError
from knox.models import AuthToken

from controlplane.exceptions import ServiceConflict
from tenants.models import AuditEvent
from tenants.services import user_create, user_set_active, user_set_platform_admin
from tests.factories import UserFactory

STRONG = "a-long-passphrase-nobody-guesses-42"


def test_a_platform_admin_creates_a_user_whose_password_is_hashed_and_never_audited(
    root: Any,
) -> None:
    user = user_create(actor=root, username="dana", email="dana@example.com", password=STRONG)
    assert user.check_password(STRONG) and user.password != STRONG
    event = AuditEvent.objects.get(action="user.create")
    assert event.data == {"username": "dana", "email": "dana@example.com", "is_staff": False}
    assert STRONG not in str(event.data)


def test_a_taken_username_and_a_weak_password_are_both_named_and_nothing_is_written(
    root: Any, alice: Any
) -> None:
    with pytest.raises(ValidationError) as refused:
        user_create(actor=root, username="ALICE", email="a@example.com", password="123")
    assert set(refused.value.message_dict) == {"username", "password"}
    assert not get_user_model().objects.filter(email="a@example.com").exists()


def test_only_a_platform_admin_creates_users(alice: Any) -> None:
    with pytest.raises(PermissionDenied):
        user_create(actor=alice, username="eve", email="e@example.com", password=STRONG)


def test_deactivating_revokes_the_users_tokens_and_activating_again_restores_sign_in(
    root: Any, bob: Any
) -> None:
    AuthToken.objects.create(user=bob)
    user_set_active(actor=root, user=bob, active=False)
    bob.refresh_from_db()
    assert not bob.is_active and not AuthToken.objects.filter(user=bob).exists()
    assert AuditEvent.objects.get(action="user.deactivate").data["tokens_revoked"] == 1
    user_set_active(actor=root, user=bob, active=True)
    bob.refresh_from_db()
    assert bob.is_active
    assert AuditEvent.objects.get(action="user.activate").data["tokens_revoked"] == 0


def test_a_change_to_the_state_a_user_is_in_already_writes_nothing(root: Any, bob: Any) -> None:
    user_set_active(actor=root, user=bob, active=True)
    user_set_platform_admin(actor=root, user=bob, admin=False)
    assert not AuditEvent.objects.exists()


def test_nobody_deactivates_or_demotes_themselves(root: Any) -> None:
    UserFactory(username="other-admin", is_staff=True)
    with pytest.raises(ServiceConflict) as deactivate:
        user_set_active(actor=root, user=root, active=False)
    with pytest.raises(ServiceConflict) as demote:
        user_set_platform_admin(actor=root, user=root, admin=False)
    assert deactivate.value.code == demote.value.code == "self"


def test_the_last_active_platform_admin_stays(root: Any) -> None:
    # The actor is a platform admin whose account is inactive: root is the only active one.
    ghost = UserFactory(username="ghost-admin", is_staff=True, is_active=False)
    for change in (
        lambda: user_set_platform_admin(actor=ghost, user=root, admin=False),
        lambda: user_set_active(actor=ghost, user=root, active=False),
    ):
        with pytest.raises(ServiceConflict) as refused:
            change()
        assert refused.value.code == "last_admin"
    other = UserFactory(username="other-admin", is_staff=True)
    user_set_platform_admin(actor=other, user=root, admin=False)
    root.refresh_from_db()
    assert not root.is_staff
    assert AuditEvent.objects.get(action="user.platform_admin_removed").data == {
        "username": "root",
        "is_staff": False,
    }
