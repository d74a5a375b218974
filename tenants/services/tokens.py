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
    expiry = instance.expiry.isoformat() if instance.expiry else None
    _audit_token("token.create", instance, data={"expiry": expiry})
    return instance, key


@transaction.atomic
def token_revoke(*, token: AuthToken) -> None:
    """Revoke (delete) one API token; requests bearing it are refused from now on."""
    _audit_token("token.revoke", token)
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


def _audit_token(action: str, token: AuthToken, data: dict[str, Any] | None = None) -> None:
    # A token is named by the start of its digest, never by its key.
    audit_record(
        actor=token.user,
        action=action,
        object_type="authtoken",
        object_id=token.digest[:16],
        object_repr=f"token of {token.user.get_username()}",
        data=data,
    )
