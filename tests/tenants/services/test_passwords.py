"""tenants.services.passwords, called directly: your own change keeps your tokens, an
admin's temporary password revokes them and must be changed, an SSO account has none."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from knox.models import AuthToken

from tenants.models import AuditEvent
from tenants.services.passwords import (
    must_change_password,
    password_change,
    password_reset_complete,
    password_set_temporary,
)

PASSWORD = "correct-horse-battery"  # tests.factories.UserFactory's
NEW = "a-long-unusual-passphrase-42"


def test_your_own_change_needs_the_old_password_and_keeps_your_tokens(bob: Any) -> None:
    AuthToken.objects.create(user=bob)
    with pytest.raises(ValidationError) as wrong:
        password_change(user=bob, old_password="guess", new_password=NEW)
    assert "old_password" in wrong.value.message_dict
    password_change(user=bob, old_password=PASSWORD, new_password=NEW)
    bob.refresh_from_db()
    assert bob.check_password(NEW) and AuthToken.objects.filter(user=bob).count() == 1
    assert AuditEvent.objects.get(action="user.password_change").data == {"tokens_revoked": 0}


def test_a_temporary_password_revokes_tokens_and_must_be_changed(root: Any, bob: Any) -> None:
    AuthToken.objects.create(user=bob)
    password_set_temporary(actor=root, user=bob, password=NEW)
    assert must_change_password(bob) and not AuthToken.objects.filter(user=bob).exists()
    password_change(user=bob, old_password=NEW, new_password="yet-another-phrase-77")
    assert not must_change_password(bob)
    event = AuditEvent.objects.get(action="user.password_temporary")
    assert event.data == {"username": "bob", "tokens_revoked": 1} and NEW not in str(event.data)


def test_only_platform_admins_set_temporary_passwords(alice: Any, bob: Any) -> None:
    with pytest.raises(PermissionDenied):
        password_set_temporary(actor=alice, user=bob, password=NEW)


def test_an_account_without_a_usable_password_is_sent_to_its_provider(bob: Any) -> None:
    bob.set_unusable_password()
    bob.save()
    with pytest.raises(ValidationError) as refused:
        password_reset_complete(user=bob, new_password=NEW)
    assert "new_password2" in refused.value.message_dict
    assert not AuditEvent.objects.filter(action="user.password_reset").exists()
