"""The new-service form in a real browser: ticking "Scale to zero when idle" (a click on
the checkbox) creates a service with the option, and its page shows the option and
explains the cold start (503 with Retry-After until it is ready)."""

from __future__ import annotations

from typing import Any

import pytest

import tests.frontend.browser  # noqa: F401  (sets DJANGO_ALLOW_ASYNC_UNSAFE first)
from clusters.models import Service
from tests.clusters.kinds.rayservice.samples import STABLE_DIFFUSION
from tests.frontend.test_browser import sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_form_sets_scale_to_zero_and_the_page_explains_the_cold_start(
    page: Any, live_server: Any, browser_env: None, bob: Any
) -> None:
    from playwright.sync_api import expect

    base = live_server.url
    sign_in(page, base, "bob")
    page.goto(f"{base}/t/acme/services/new/")
    page.get_by_label("Name").fill("sd")
    page.get_by_label("Serve config").fill(STABLE_DIFFUSION)
    box = page.get_by_label("Scale to zero when idle")
    expect(box).to_be_visible()
    expect(box).not_to_be_checked()  # off by default
    expect(page.locator("#field-scale_to_zero .help")).to_contain_text("the next request wakes it")
    box.click()
    expect(box).to_be_checked()
    page.get_by_label("Scale to zero after (minutes without requests)").fill("10")
    page.get_by_role("button", name="Create service").click()
    page.wait_for_url(f"{base}/t/acme/services/sd/")

    details = Service.objects.get(request__name="sd")
    assert details.scale_to_zero and details.scale_to_zero_after_minutes == 10
    expect(page.locator("[data-scale-to-zero]")).to_have_text("after 10 min without requests")
    cold = page.locator("[data-cold-start]")
    expect(cold).to_be_visible()
    expect(cold).to_contain_text("typically takes one to a few minutes")
    expect(cold).to_contain_text("503 with Retry-After")
