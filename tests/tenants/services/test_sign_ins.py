"""tenants.services.sign_ins: a failed sign-in is audited without the password, with one
more event for each lockout it started."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import authenticate

from tenants.lockout import Lockout
from tenants.models import AuditEvent
from tenants.services import sign_in_failure_record


@pytest.mark.django_db
def test_a_failure_and_the_lockouts_it_started_are_each_one_event() -> None:
    sign_in_failure_record(
        username="mallory",
        address="203.0.113.9",
        path="/login/",
        lockouts=[Lockout(scope="user", seconds=900), Lockout(scope="address", seconds=60)],
    )
    failed = AuditEvent.objects.get(action="sign_in.failed")
    assert failed.actor is None and failed.actor_name == "anonymous"
    assert failed.data == {"username": "mallory", "address": "203.0.113.9", "path": "/login/"}
    locks = {e.object_type: e for e in AuditEvent.objects.filter(action="sign_in.lockout")}
    assert locks["user"].object_id == "mallory" and locks["user"].data["seconds"] == 900
    assert locks["address"].object_id == "203.0.113.9"


def test_a_wrong_password_anywhere_is_audited_through_the_signal(bob: Any) -> None:
    assert authenticate(None, username="bob", password="not-bobs-password") is None
    event = AuditEvent.objects.get(action="sign_in.failed")
    assert event.object_id == "bob" and "not-bobs-password" not in str(event.data)
