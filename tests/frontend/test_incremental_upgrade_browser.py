"""The new-service form in a real browser: the incremental upgrade's options appear
once NewClusterWithIncrementalUpgrade is picked (a click on its choice), a step larger
than the surge comes back on its input, and the corrected form creates a production
service that autoscales with that strategy and its options."""

from __future__ import annotations

from typing import Any

import pytest

import tests.frontend.browser  # noqa: F401  (sets DJANGO_ALLOW_ASYNC_UNSAFE first)
from clusters.models import Service
from tests.clusters.kinds.rayservice.samples import STABLE_DIFFUSION
from tests.frontend.test_browser import sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_form_picks_an_incremental_upgrade_with_its_options(
    page: Any, live_server: Any, browser_env: None, alice: Any
) -> None:
    from playwright.sync_api import expect

    base = live_server.url
    sign_in(page, base, "alice")
    page.goto(f"{base}/t/acme/services/new/")
    page.get_by_label("Name").fill("sd")
    page.get_by_label("Kind").select_option("prod")
    page.get_by_label("Flavor").select_option("l4")
    page.get_by_label("Workers", exact=True).fill("1")
    page.get_by_label("Min workers").fill("1")
    page.get_by_label("Max workers").fill("2")
    page.get_by_label("Serve config").fill(STABLE_DIFFUSION)
    surge = page.get_by_label("Max surge (%)")
    expect(surge).to_be_hidden()  # NewCluster is the default: no options to give
    choice = page.get_by_label("NewClusterWithIncrementalUpgrade")
    choice.click()
    expect(choice).to_be_checked()
    expect(surge).to_be_visible()
    surge.fill("50")
    page.get_by_label("Traffic step (%)").fill("60")
    page.get_by_label("Step interval (seconds)").fill("10")
    page.get_by_role("button", name="Create service").click()

    # KubeRay's rule, said on the input: a step may not exceed the surge.
    error = page.locator("#field-step_size_percent .error")
    expect(error).to_contain_text("At most the max surge")
    assert not Service.objects.exists()
    expect(page.get_by_label("Traffic step (%)")).to_be_visible()  # still picked
    page.get_by_label("Traffic step (%)").fill("25")
    page.get_by_role("button", name="Create service").click()
    page.wait_for_url(f"{base}/t/acme/services/sd/")

    details = Service.objects.get(request__name="sd")
    assert details.upgrade_type == "NewClusterWithIncrementalUpgrade"
    assert details.upgrade_options == {
        "maxSurgePercent": 50,
        "stepSizePercent": 25,
        "intervalSeconds": 10,
    }
    expect(page.locator("[data-upgrade-strategy]")).to_have_text(
        "NewClusterWithIncrementalUpgrade (max surge 50%, traffic step 25% every 10 s)"
    )
