"""``GET /api/v1/platform/fair-share/``: the fair-share page's numbers as JSON, recent
GPU-hours and standing included when usage-decayed fair share is on; platform admins only."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone
from rest_framework.test import APIClient

from tests.factories import usage_span

URL = "/api/v1/platform/fair-share/"


def _client(user: Any) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_recent_usage_and_standing_per_tenant(
    root: Any, alice: Any, acme: Any, globex: Any, h100: Any, settings: Any
) -> None:
    now = timezone.now()
    usage_span(
        tenant=acme, owner=alice, flavor=h100, gpus=8, start=now - timedelta(days=2), end=now
    )
    settings.FAIR_SHARE_HALF_LIFE_HOURS = 168
    body = _client(root).get(URL).json()
    assert body["half_life_hours"] == 168
    (cohort,) = body["cohorts"]
    tenants = {t["tenant"]: t for t in cohort["tenants"]}
    assert [t["tenant"] for t in cohort["tenants"]] == ["globex", "acme"]
    acme_row = tenants["acme"]
    # 8 GPUs for the last two days, a week's half-life: a little under 8 x 48.
    assert 8 * 48 * 0.9 < acme_row["recent_gpu_hours"] < 8 * 48
    assert acme_row["recent_part"] == 1.0 and acme_row["weight_part"] == 0.5
    assert acme_row["standing"].startswith("over its share")
    assert tenants["globex"]["standing"].startswith("under its share")
    h100_row = next(f for f in acme_row["flavors"] if f["flavor"] == "h100")
    assert h100_row["recent_gpu_hours"] == acme_row["recent_gpu_hours"]


def test_off_it_shows_no_recent_usage(root: Any, acme: Any, settings: Any) -> None:
    settings.FAIR_SHARE_HALF_LIFE_HOURS = 0
    body = _client(root).get(URL).json()
    assert body["half_life_hours"] == 0
    assert all(t["standing"] == "" for c in body["cohorts"] for t in c["tenants"])


def test_only_platform_admins(alice: Any, bob: Any) -> None:
    for user in (alice, bob):
        response = _client(user).get(URL)
        assert response.status_code == 403
        assert response.json()["error"]["message"].startswith("Only platform admins")
    assert APIClient().get(URL).status_code in (401, 403)
