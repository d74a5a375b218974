"""Health, readiness and metrics endpoints."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.mark.django_db
def test_healthz_answers_without_auth(client: Any) -> None:
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


@pytest.mark.django_db
def test_metrics_exposes_cluster_gauges(client: Any, acme: Any) -> None:
    response = client.get("/metrics")
    assert response.status_code == 200
    assert b"gangway_tenants 1.0" in response.content
