"""The endpoint section of a service's page: URL and curl example, requests, invoke
tokens (created with the secret shown once, listed, revoked) and the public switch."""

from __future__ import annotations

from typing import Any

import pytest

from clusters.kinds.rayservice import endpoint_counts
from clusters.kinds.rayservice import requests as serving
from clusters.kinds.rayservice.endpoint_access import token_digest
from clusters.kinds.rayservice.spec import ServiceSpec
from clusters.models import ClusterRequest, Service, ServiceToken
from clusters.rows.spec import ClusterSpec
from tenants.models import AuditEvent
from tests.clusters.kinds.rayservice.samples import STABLE_DIFFUSION
from tests.frontend.test_pages import client_for

pytestmark = pytest.mark.django_db

PAGE = "/t/acme/services/sd/"


@pytest.fixture
def service(acme: Any, bob: Any, h100: Any) -> ClusterRequest:
    spec = ClusterSpec(kind="dev", flavor=h100, workers=1, name="sd")
    return serving.service_create(
        actor=bob, tenant=acme, spec=spec, service=ServiceSpec(serve_config=STABLE_DIFFUSION)
    )


def test_the_page_shows_the_endpoint_and_its_owner_manages_tokens(
    bob: Any, vera: Any, service: ClusterRequest
) -> None:
    endpoint_counts.request_counted(service.pk)
    endpoint_counts.request_counted(service.pk)
    client = client_for(bob)
    page = client.get(PAGE).content.decode()
    assert "/serve/acme/sd/</code>" in page
    assert "curl -H &quot;Authorization: Bearer $GANGWAY_TOKEN&quot;" in page
    assert 'data-requests="2"' in page
    assert "Make public" not in page  # an engineer: tokens, not the public switch

    made = client.post(PAGE + "tokens/", {"name": "frontend"})
    assert made.status_code == 201
    shown = made.content.decode()
    token = ServiceToken.objects.get(service_id=service.pk)
    secret = shown.split('<code id="new-token">')[1].split("</code>")[0]
    assert token_digest(secret) == token.digest  # shown once, stored hashed
    again = client.get(PAGE).content.decode()
    assert secret not in again and 'data-token="frontend"' in again
    assert client.post(PAGE + "tokens/", {"name": ""}).status_code == 400
    assert ServiceToken.objects.count() == 1

    # A viewer sees the endpoint, not the tokens, and may not make one.
    viewer = client_for(vera)
    assert 'data-token="frontend"' not in viewer.get(PAGE).content.decode()
    assert viewer.post(PAGE + "tokens/", {"name": "x"}).status_code == 403

    revoked = client.post(PAGE + f"tokens/{token.pk}/revoke/")
    assert revoked.status_code == 302
    assert not ServiceToken.objects.exists()
    assert client.post(PAGE + f"tokens/{token.pk}/revoke/").status_code == 404
    assert {"service.token_created", "service.token_revoked"} <= set(
        AuditEvent.objects.values_list("action", flat=True)
    )


def test_a_tenant_admin_makes_the_endpoint_public(
    alice: Any, bob: Any, service: ClusterRequest
) -> None:
    assert client_for(bob).post(PAGE + "public/", {"public": "1"}).status_code == 403
    admin = client_for(alice)
    assert "Make public" in admin.get(PAGE).content.decode()
    assert admin.post(PAGE + "public/", {"public": "1"}).status_code == 302
    assert Service.objects.get(pk=service.pk).public
    page = admin.get(PAGE).content.decode()
    assert 'data-public="true"' in page and "Make private" in page
    assert "curl http" in page  # no token in the public example
    admin.post(PAGE + "public/", {"public": "0"})
    assert not Service.objects.get(pk=service.pk).public
