"""tenants.services.tokens: API tokens issued, revoked one by one or all at once; the
audit names a token by the start of its digest, never by its key."""

from __future__ import annotations

from typing import Any

from knox.models import AuthToken

from tenants.models import AuditEvent
from tenants.services import token_issue, token_revoke, token_revoke_all


def test_issuing_returns_the_key_once_and_audits_the_digest_not_the_key(bob: Any) -> None:
    instance, key = token_issue(user=bob)
    assert AuthToken.objects.get(pk=instance.pk).user == bob
    event = AuditEvent.objects.get(action="token.create")
    assert event.object_id == instance.digest[:16] and event.actor == bob
    assert key not in str(event.data) and key not in event.object_repr


def test_revoking_one_token_leaves_the_others(bob: Any) -> None:
    first, _ = token_issue(user=bob)
    second, _ = token_issue(user=bob)
    first_id = first.digest[:16]
    token_revoke(token=first)
    assert list(AuthToken.objects.filter(user=bob)) == [second]
    assert AuditEvent.objects.get(action="token.revoke").object_id == first_id


def test_revoking_all_counts_them_in_one_event_and_touches_nobody_elses(
    bob: Any, alice: Any
) -> None:
    digests = sorted(token_issue(user=bob)[0].digest[:16] for _ in range(3))
    token_issue(user=alice)
    assert token_revoke_all(user=bob) == 3
    assert not AuthToken.objects.filter(user=bob).exists()
    assert AuthToken.objects.filter(user=alice).count() == 1
    event = AuditEvent.objects.get(action="token.revoke_all")
    assert event.data == {"count": 3, "tokens": digests}
