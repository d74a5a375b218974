"""The endpoint's access services without a loop: who may hand out and revoke invoke
tokens, what a bad name gets, that only a digest is stored, and that the public switch
is an admin's and audited once per change."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from clusters.kinds.rayservice import endpoint_access
from clusters.models import ClusterRequest, Service, ServiceToken
from tenants.models import AuditEvent
from tests.clusters.kinds.rayservice.samples import queued_service

pytestmark = pytest.mark.django_db


@pytest.fixture
def service(acme: Any, bob: Any) -> ClusterRequest:
    """bob's service, queued (the access rules do not depend on its state)."""
    return queued_service(acme, bob)


def test_the_owner_creates_a_token_whose_secret_is_never_stored(
    service: ClusterRequest, bob: Any
) -> None:
    token, secret = endpoint_access.service_token_create(actor=bob, request=service, name=" cron ")
    assert token.name == "cron"
    assert secret.startswith(endpoint_access.TOKEN_PREFIX)
    stored = ServiceToken.objects.get(pk=token.pk)
    assert stored.digest == endpoint_access.token_digest(secret)
    assert secret not in {stored.digest, stored.prefix}
    assert secret.startswith(stored.prefix)
    assert list(endpoint_access.service_tokens(request=service)) == [stored]
    assert AuditEvent.objects.filter(action="service.token_created").count() == 1


def test_a_bad_or_repeated_name_is_refused_and_writes_nothing(
    service: ClusterRequest, bob: Any
) -> None:
    endpoint_access.service_token_create(actor=bob, request=service, name="cron")
    for name, said in (("  ", "Name the token"), ("cron", "already has a token 'cron'")):
        with pytest.raises(ValidationError, match=said):
            endpoint_access.service_token_create(actor=bob, request=service, name=name)
    assert ServiceToken.objects.count() == 1
    assert AuditEvent.objects.filter(action="service.token_created").count() == 1


def test_only_the_owner_or_an_admin_manages_tokens(
    service: ClusterRequest, alice: Any, bob: Any, vera: Any
) -> None:
    with pytest.raises(PermissionDenied):
        endpoint_access.service_token_create(actor=vera, request=service, name="mine")
    token, _ = endpoint_access.service_token_create(actor=alice, request=service, name="admin")
    with pytest.raises(PermissionDenied):
        endpoint_access.service_token_revoke(actor=vera, request=service, token_id=token.pk)
    assert ServiceToken.objects.filter(pk=token.pk).exists()
    endpoint_access.service_token_revoke(actor=bob, request=service, token_id=token.pk)
    assert not ServiceToken.objects.filter(pk=token.pk).exists()
    with pytest.raises(ServiceToken.DoesNotExist):
        endpoint_access.service_token_revoke(actor=bob, request=service, token_id=token.pk)
    assert AuditEvent.objects.filter(action="service.token_revoked").count() == 1


def test_the_public_switch_is_an_admins_and_audited_once_per_change(
    service: ClusterRequest, alice: Any, bob: Any
) -> None:
    with pytest.raises(PermissionDenied):
        endpoint_access.service_public_set(actor=bob, request=service, public=True)
    assert not Service.objects.get(pk=service.pk).public
    for public in (True, True, False):
        endpoint_access.service_public_set(actor=alice, request=service, public=public)
    assert not Service.objects.get(pk=service.pk).public
    said = list(
        AuditEvent.objects.filter(action__startswith="service.made_").values_list(
            "action", flat=True
        )
    )
    assert sorted(said) == ["service.made_private", "service.made_public"]


def test_a_tokens_use_is_noted_at_most_once_a_minute(service: ClusterRequest, bob: Any) -> None:
    token, _ = endpoint_access.service_token_create(actor=bob, request=service, name="cron")
    endpoint_access.token_used(token)
    first = ServiceToken.objects.get(pk=token.pk).last_used_at
    assert first is not None
    endpoint_access.token_used(ServiceToken.objects.get(pk=token.pk))
    assert ServiceToken.objects.get(pk=token.pk).last_used_at == first
    ServiceToken.objects.filter(pk=token.pk).update(last_used_at=first - timedelta(minutes=2))
    endpoint_access.token_used(ServiceToken.objects.get(pk=token.pk))
    assert ServiceToken.objects.get(pk=token.pk).last_used_at > first
