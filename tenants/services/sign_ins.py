"""The audit trail of failed sign-ins and the lockouts they start (tenants/lockout.py
counts them)."""

from __future__ import annotations

from collections.abc import Sequence

from django.db import transaction

from tenants.audit import audit_record
from tenants.lockout import Lockout


@transaction.atomic
def sign_in_failure_record(
    *, username: str, address: str, path: str, lockouts: Sequence[Lockout] = ()
) -> None:
    """Audit a failed password check: the username tried, the client's address and the
    path, never the password; and each lockout the failure started. Platform admins
    read these (no tenant); the lockout bounds how many one client can cause."""
    audit_record(
        actor=None,
        actor_name="anonymous",
        action="sign_in.failed",
        object_type="user",
        object_id=username[:128],
        object_repr=username[:200],
        data={"username": username[:150], "address": address, "path": path[:200]},
    )
    for lock in lockouts:
        audit_record(
            actor=None,
            actor_name="anonymous",
            action="sign_in.lockout",
            object_type=lock.scope,
            object_id=(username if lock.scope == "user" else address)[:128],
            object_repr=(username if lock.scope == "user" else address)[:200],
            data={
                "scope": lock.scope,
                "seconds": lock.seconds,
                "username": username[:150],
                "address": address,
            },
        )
