"""API tokens (knox): issue one for a signed-in user, revoke one or all of them."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from knox.models import AuthToken

from tenants.audit import audit_record


@transaction.atomic
def token_issue(*, user: Any) -> tuple[AuthToken, str]:
    """Issue an API token for an authenticated user; returns the row and the key.

    Only a hash of the key is stored (knox), so the key is shown once, here.
    """
    instance, key = AuthToken.objects.create(user=user)
    audit_record(
        actor=user,
        action="token.create",
        object_type="authtoken",
        object_id=instance.digest[:16],
        object_repr=f"token of {user.get_username()}",
        data={"expiry": instance.expiry.isoformat() if instance.expiry else None},
    )
    return instance, key


@transaction.atomic
def token_revoke(*, token: AuthToken) -> None:
    """Revoke (delete) one API token; requests bearing it are refused from now on."""
    user = token.user
    audit_record(
        actor=user,
        action="token.revoke",
        object_type="authtoken",
        object_id=token.digest[:16],
        object_repr=f"token of {user.get_username()}",
    )
    token.delete()


@transaction.atomic
def token_revoke_all(*, user: Any) -> int:
    """Revoke every API token of ``user`` (a leaked key whose id is unknown, a lost
    laptop); returns how many. One audit event names them all."""
    tokens = AuthToken.objects.filter(user=user)
    ids = sorted(digest[:16] for digest in tokens.values_list("digest", flat=True))
    audit_record(
        actor=user,
        action="token.revoke_all",
        object_type="user",
        object_id=str(user.pk),
        object_repr=f"tokens of {user.get_username()}",
        data={"count": len(ids), "tokens": ids},
    )
    tokens.delete()
    return len(ids)
