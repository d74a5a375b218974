""" "Keep workers together" in a real browser: the level appears only for a production
request on a flavor with a topology, offers that flavor's levels alone, and the request
the visible button submits carries the level and mode picked."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

import tests.frontend.browser  # noqa: F401  (sets DJANGO_ALLOW_ASYNC_UNSAFE first)
from clusters.models import ClusterRequest
from tests.frontend.test_browser import sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

BLOCK = "network.topology.kubernetes.io/block"
RACK = "network.topology.kubernetes.io/rack"
# Where the screenshot goes (a person looks at it; CI keeps it as an artefact).
SHOTS = Path(os.environ.get("GANGWAY_SCREENSHOTS", "/tmp"))


def test_a_production_cluster_asks_for_one_rack(
    page: Any, live_server: Any, browser_env: None, alice: Any, h100: Any, l4: Any
) -> None:
    from playwright.sync_api import expect

    h100.topology = [BLOCK, RACK]
    h100.save()
    base = live_server.url
    sign_in(page, base, "alice")
    page.goto(f"{base}/t/acme/clusters/new/")
    level = page.get_by_label("Keep workers together")
    required = page.get_by_label("Required", exact=True)
    preferred = page.get_by_label("Preferred", exact=True)
    expect(level).to_be_hidden()  # a dev cluster: its workers go wherever they fit

    page.get_by_label("Name").fill("train")
    page.get_by_label("Kind").select_option("prod")
    page.get_by_label("Flavor").select_option("l4")
    expect(level).to_be_hidden()  # l4 has no topology
    page.get_by_label("Flavor").select_option("h100")
    expect(level).to_be_visible()
    expect(required).to_be_visible()
    expect(required).to_be_checked()  # the API's default
    expect(level.locator("option:not([hidden])")).to_have_text(
        ["No: wherever they fit", f"One block ({BLOCK})", f"One rack ({RACK})"]
    )
    level.select_option(RACK)
    preferred.click()
    page.get_by_label("Workers", exact=True).fill("2")
    page.screenshot(path=str(SHOTS / "topology-new-cluster.png"), full_page=True)
    page.get_by_role("button", name="Request cluster").click()
    page.wait_for_url(f"{base}/t/acme/clusters/train/")

    row = ClusterRequest.objects.get(name="train")
    assert (row.kind, row.workers) == ("prod", 2)
    assert (row.topology_level, row.topology_mode) == (RACK, "preferred")


def test_a_level_picked_then_left_for_dev_is_refused_beside_it(
    page: Any, live_server: Any, browser_env: None, alice: Any, h100: Any
) -> None:
    from playwright.sync_api import expect

    h100.topology = [RACK]
    h100.save()
    base = live_server.url
    sign_in(page, base, "alice")
    page.goto(f"{base}/t/acme/jobs/new/")
    page.get_by_label("Entrypoint").fill("python train.py")
    page.get_by_label("Kind").select_option("prod")
    page.get_by_label("Flavor").select_option("h100")
    page.get_by_label("Keep workers together").select_option(RACK)
    # Back to dev: the inputs hide but still hold the level; the service says why not.
    page.get_by_label("Kind").select_option("dev")
    expect(page.get_by_label("Keep workers together")).to_be_hidden()
    page.get_by_role("button", name="Submit job").click()
    error = page.locator("#field-topology_level .error")
    expect(error).to_be_visible()  # a refused input stays in sight, kind dev or not
    expect(error).to_contain_text("Only a production cluster's whole-node workers")
    page.screenshot(path=str(SHOTS / "topology-new-job-refused.png"), full_page=True)
    assert not ClusterRequest.objects.exists()
