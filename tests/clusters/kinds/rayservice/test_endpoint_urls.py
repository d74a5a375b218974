"""The route of services' endpoints and its view (clusters.kinds.rayservice.endpoint_urls):
``/serve/{tenant}/{service}/{route...}`` at the site's root, taken without a CSRF token
and answered sandboxed, refusals too; relaying to Serve is test_endpoint_relay.py's."""

from __future__ import annotations

from typing import Any

import pytest
from django.conf import settings
from django.test import Client
from django.urls import Resolver404, resolve, reverse

from clusters.kinds.rayservice.endpoint_urls import serve_endpoint
from tests.clusters.kinds.rayservice.samples import queued_service


@pytest.mark.parametrize(
    ("path", "kwargs"),
    [
        ("/serve/acme/sd/", {"slug": "acme", "name": "sd", "path": ""}),
        (
            "/serve/acme/sd/v1/imagine/deep",
            {"slug": "acme", "name": "sd", "path": "v1/imagine/deep"},
        ),
        # Any segment is taken: a malformed name is the endpoint's own 404.
        ("/serve/acme/Not_A.Name/x", {"slug": "acme", "name": "Not_A.Name", "path": "x"}),
    ],
)
def test_the_route_takes_the_tenant_the_service_and_the_rest(
    path: str, kwargs: dict[str, str]
) -> None:
    found = resolve(path)
    assert found.func is serve_endpoint and found.url_name == "service-endpoint"
    assert found.kwargs == kwargs
    assert reverse("service-endpoint", kwargs=kwargs) == path


def test_a_path_short_of_a_service_is_not_the_endpoint_s() -> None:
    with pytest.raises(Resolver404):
        resolve("/serve/acme/sd")


@pytest.mark.django_db
def test_no_csrf_token_is_asked_and_every_answer_is_sandboxed(acme: Any, bob: Any) -> None:
    queued_service(acme, bob)
    client = Client(enforce_csrf_checks=True)
    # A program's POST without a cookie or a CSRF token reaches the relay, which asks
    # for a token (a 401, not the CSRF 403).
    refused = client.post("/serve/acme/sd/imagine", data=b"{}", content_type="application/json")
    assert refused.status_code == 401
    assert refused.json()["error"]["code"] == "not_authenticated"
    assert "sandbox" in refused["Content-Security-Policy"]
    unknown = client.get("/serve/acme/nosuch/")
    assert "sandbox" in unknown["Content-Security-Policy"]
    # The product's own pages are not sandboxed: the header is the endpoint's.
    page = client.get(settings.LOGIN_URL)
    assert page.status_code == 200
    assert "sandbox" not in page.get("Content-Security-Policy", "")
