"""The new-request forms in a real browser: they open on a flavor the tenant has quota
on (not on a flavor just added to the catalogue), the verdict says what a production
shape is charged, and after Back it judges the fields the browser shows."""

from __future__ import annotations

import re
from typing import Any

import pytest

import tests.frontend.browser  # noqa: F401  (sets DJANGO_ALLOW_ASYNC_UNSAFE first)
from clusters.models import ClusterRequest
from clusters.requests.dry_run import dry_run_verdict
from clusters.rows.spec import ClusterSpec
from tenants.models import GpuFlavor
from tests.frontend.test_browser import sign_in

# A cluster's page, where a submitted form leads.
DETAIL = re.compile(r"/t/acme/clusters/(?!new/)[a-z0-9-]+/$")

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _add_flavor_a100(page: Any, base: str) -> None:
    """A platform admin adds a flavor that sorts before every other, with no quota yet."""
    page.goto(f"{base}/platform/flavors/")
    form = page.locator("form", has=page.get_by_role("button", name="Add flavor"))
    form.get_by_label("Name").fill("a100")
    form.locator("#id_gpu_product").fill("NVIDIA-A100-SXM4-80GB")
    form.locator("#id_gpus_per_node").fill("8")
    form.locator("#id_cpu_per_node").fill("128")
    form.locator("#id_memory_per_node_gib").fill("1024")
    form.locator("#id_node_count").fill("2")
    form.get_by_role("button", name="Add flavor").click()
    page.wait_for_url(f"{base}/platform/flavors/")
    assert GpuFlavor.objects.filter(name="a100").exists()


def _expected_headline(tenant: Any, owner: Any, workers: int) -> str:
    """What the server says now of a production request of ``workers`` H100 workers."""
    spec = ClusterSpec(kind="prod", flavor=GpuFlavor.objects.get(name="h100"), workers=workers)
    return str(dry_run_verdict(tenant=tenant, owner=owner, spec=spec)["headline"])


def test_forms_open_on_a_flavor_with_quota_and_judge_what_they_show_after_back(
    browser: Any, live_server: Any, browser_env: None, root: Any, alice: Any, acme: Any
) -> None:
    from playwright.sync_api import expect

    base = live_server.url
    admin = browser.new_context().new_page()
    sign_in(admin, base, "root")
    _add_flavor_a100(admin, base)

    page = browser.new_context().new_page()
    sign_in(page, base, "alice")
    # The job form too opens on a flavor acme holds quota on.
    page.goto(f"{base}/t/acme/jobs/new/")
    expect(page.get_by_label("Flavor")).to_have_value("h100")
    page.get_by_label("Entrypoint").fill("python train.py")
    page.get_by_label("Entrypoint").press("Tab")
    expect(page.locator("#verdict [data-verdict]")).to_contain_text("Fits now on h100: 1 GPU")

    page.goto(f"{base}/t/acme/clusters/new/")
    verdict = page.locator("#verdict [data-verdict]")
    expect(page.get_by_label("Flavor")).to_have_value("h100")
    expect(verdict).to_have_attribute("data-verdict", "fits_now")
    expect(verdict).to_contain_text("Fits now on h100: 1 GPU charged.")

    # A production shape: the verdict says the whole nodes and GPUs it is charged.
    page.get_by_label("Kind").select_option("prod")
    page.get_by_label("Workers", exact=True).fill("2")
    page.get_by_label("Workers", exact=True).press("Tab")
    expect(verdict).to_contain_text("Fits now on h100: 2 whole nodes, 16 GPUs charged.")
    page.get_by_role("button", name="Request cluster").click()  # the name is generated
    page.wait_for_url(DETAIL)
    assert ClusterRequest.objects.get().gpus == 16

    # Back, nothing changed: the verdict is the server's for the fields shown now (the
    # first request now waits ahead of this one).
    page.go_back()
    page.wait_for_url(f"{base}/t/acme/clusters/new/")
    expect(page.get_by_label("Kind")).to_have_value("prod")
    expect(page.get_by_label("Workers", exact=True)).to_have_value("2")
    headline = page.locator("#verdict [data-verdict] strong").first
    expect(headline).to_have_text(_expected_headline(acme, alice, 2))

    # Change a field, submit, Back: the verdict follows the changed field.
    page.get_by_label("Workers", exact=True).fill("1")
    page.get_by_label("Workers", exact=True).press("Tab")
    expect(verdict).to_contain_text("1 whole node, 8 GPUs charged")
    page.get_by_role("button", name="Request cluster").click()
    page.wait_for_url(DETAIL)
    assert sorted(ClusterRequest.objects.values_list("gpus", flat=True)) == [8, 16]
    page.go_back()
    page.wait_for_url(f"{base}/t/acme/clusters/new/")
    expect(page.get_by_label("Workers", exact=True)).to_have_value("1")
    expect(headline).to_have_text(_expected_headline(acme, alice, 1))
    expect(headline).to_contain_text("1 whole node, 8 GPUs charged")
