"""Adding and removing a user's own SSH public keys (their profile's)."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.http import Http404

from tenants.audit import audit_record
from tenants.ssh_keys import SshKey, parse_public_key

MAX_KEYS_PER_USER = 20


@transaction.atomic
def ssh_key_add(*, user: Any, public_key: str, name: str = "") -> SshKey:
    """Add a public key to ``user``'s profile: a key that is not one valid OpenSSH public
    key, one already there, or one past the limit is a ``ValidationError``."""
    try:
        parsed = parse_public_key(public_key)
    except ValueError as exc:
        raise ValidationError({"public_key": [str(exc)]}) from None
    mine = SshKey.objects.select_for_update().filter(user=user)
    if mine.filter(fingerprint=parsed.fingerprint).exists():
        raise ValidationError(
            {"public_key": [f"You have added this key already ({parsed.fingerprint})."]}
        )
    if mine.count() >= MAX_KEYS_PER_USER:
        raise ValidationError({"public_key": [f"At most {MAX_KEYS_PER_USER} keys per user."]})
    key = SshKey.objects.create(
        user=user,
        name=(name or parsed.comment)[:100],
        public_key=parsed.line,
        fingerprint=parsed.fingerprint,
    )
    audit_record(
        actor=user,
        action="ssh_key.add",
        obj=key,
        data={"fingerprint": key.fingerprint, "name": key.name},
    )
    return key


@transaction.atomic
def ssh_key_remove(*, user: Any, key_id: int) -> None:
    """Remove one of ``user``'s own keys (another's, or none, is a 404)."""
    key = SshKey.objects.filter(user=user, pk=key_id).first()
    if key is None:
        raise Http404()
    audit_record(
        actor=user,
        action="ssh_key.remove",
        obj=key,
        data={"fingerprint": key.fingerprint, "name": key.name},
    )
    key.delete()
