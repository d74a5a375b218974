"""GPU utilisation in a real browser: a tenant admin turns the idle policy's GPU rule on
by typing in the policy form, and a cluster's page shows each worker GPU's utilisation,
its newest value and a sparkline of the recent readings."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

import tests.frontend.browser  # noqa: F401  (sets DJANGO_ALLOW_ASYNC_UNSAFE first)
from clusters.models import GpuSample
from tests.frontend.test_browser import sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_tenant_admin_turns_the_gpu_rule_on(
    page: Any, live_server: Any, browser_env: None, alice: Any, acme: Any
) -> None:
    from playwright.sync_api import expect

    base = live_server.url
    sign_in(page, base, "alice")
    page.goto(f"{base}/t/acme/policy/")
    field = page.get_by_label("Idle below GPU utilisation (%)")
    expect(field).to_be_visible()
    expect(field).to_have_value("0")  # off by default
    field.fill("5")
    page.get_by_role("button", name="Save policy").click()
    page.wait_for_url(f"{base}/t/acme/policy/**")
    acme.refresh_from_db()
    assert acme.idle_gpu_util_percent == 5
    field.fill("101")
    page.get_by_role("button", name="Save policy").click()
    expect(page.get_by_text("Ensure this value is less than or equal to 100.")).to_be_visible()
    acme.refresh_from_db()
    assert acme.idle_gpu_util_percent == 5


def test_the_cluster_page_shows_utilisation_per_worker_over_time(
    page: Any, live_server: Any, browser_env: None, bob: Any, ready_cluster: Any
) -> None:
    from playwright.sync_api import expect

    start = timezone.now() - timedelta(minutes=3)
    for i, value in enumerate((90, 80, 3)):
        GpuSample.objects.create(
            cluster=ready_cluster,
            at=start + timedelta(minutes=i),
            pod="bob-ready-gpu-worker-abcde",
            gpu_uuid="GPU-1234",
            utilization=value,
            memory_used_mib=1000 + value,
        )
    base = live_server.url
    sign_in(page, base, "bob")
    page.goto(f"{base}/t/acme/clusters/bob-ready/")
    section = page.locator("#gpu-utilization")
    expect(section).to_be_visible()
    row = section.locator('tr[data-gpu="GPU-1234"]')
    expect(row).to_contain_text("bob-ready-gpu-worker-abcde")
    expect(row.locator("[data-utilization]")).to_have_text("3%")
    expect(row).to_contain_text("1003 MiB")
    spark = row.locator("svg.sparkline")
    expect(spark).to_have_attribute(
        "aria-label", "utilisation of bob-ready-gpu-worker-abcde: 90%, 80%, 3%"
    )
    points = spark.locator("polyline").get_attribute("points") or ""
    assert len(points.split()) == 3
