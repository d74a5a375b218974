"""Health, readiness and metrics endpoints."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.mark.django_db
def test_healthz_answers_without_auth(client: Any) -> None:
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


TOKEN = "a-metrics-token-of-some-length-0123456789"


@pytest.mark.django_db
def test_metrics_exposes_cluster_gauges_to_the_token_holder(
    client: Any, acme: Any, settings: Any
) -> None:
    settings.METRICS_TOKEN = TOKEN
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200
    assert b"gangway_tenants 1.0" in response.content


@pytest.mark.django_db
@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "Bearer not-the-token-at-all-0123456789",
        f"Token {TOKEN}",
        f"Bearer {TOKEN}x",
        "Bearer",
    ],
)
def test_metrics_refuses_a_scrape_without_the_token(
    client: Any, acme: Any, settings: Any, authorization: str | None
) -> None:
    settings.METRICS_TOKEN = TOKEN
    headers = {} if authorization is None else {"HTTP_AUTHORIZATION": authorization}
    response = client.get("/metrics", **headers)
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == 'Bearer realm="metrics"'
    assert response.json()["error"]["code"] == "not_authenticated"
    assert b"gangway_" not in response.content


@pytest.mark.django_db
def test_metrics_without_a_token_is_closed_in_production(
    client: Any, acme: Any, settings: Any
) -> None:
    settings.METRICS_TOKEN = ""
    settings.DEBUG = False
    response = client.get("/metrics", HTTP_AUTHORIZATION="Bearer anything-at-all-0123456789")
    assert response.status_code == 403
    assert "set METRICS_TOKEN" in response.json()["error"]["message"]
    assert b"gangway_" not in response.content


@pytest.mark.django_db
def test_metrics_without_a_token_is_open_in_development(
    client: Any, acme: Any, settings: Any
) -> None:
    # `make run` (DEBUG=1) needs no configuration to look at its own metrics.
    settings.METRICS_TOKEN = ""
    settings.DEBUG = True
    response = client.get("/metrics")
    assert response.status_code == 200
    assert b"gangway_tenants 1.0" in response.content
