"""Priority classes in a real browser: a platform admin adds one on the platform page
(and sees a clash refused beside the field); an engineer picks it on the new-cluster
form, whose select offers the tenant's classes with their descriptions, the default
preselected; the cluster's page names its class."""

from __future__ import annotations

from typing import Any

import pytest

import tests.frontend.browser  # noqa: F401  (sets DJANGO_ALLOW_ASYNC_UNSAFE first)
from clusters.models import ClusterRequest
from tenants.models import AuditEvent, PriorityClass
from tests.frontend.test_browser import sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_an_admin_adds_a_class_and_an_engineer_picks_it(
    page: Any, live_server: Any, browser_env: None, root: Any, bob: Any, globex: Any, l4: Any
) -> None:
    from playwright.sync_api import expect

    PriorityClass.objects.all().delete()
    PriorityClass.objects.create(name="normal", value=0, is_default=True, description="Default.")
    PriorityClass.objects.create(name="theirs", value=7).tenants.set([globex])
    PriorityClass.objects.create(name="urgent", value=1000, may_preempt=True)
    base = live_server.url

    sign_in(page, base, "root")
    page.goto(f"{base}/platform/tenants/")
    page.get_by_role("link", name="Priority classes").click()
    page.wait_for_url(f"{base}/platform/priority-classes/")
    page.get_by_label("Name", exact=True).fill("batch-rush")
    page.get_by_label("Value").fill("7")  # theirs has 7: refused beside the field
    page.get_by_label("Description").fill("Before normal work, after deadlines.")
    page.get_by_role("button", name="Save priority class").click()
    value = page.locator(".field", has=page.get_by_label("Value"))
    expect(value.locator(".error")).to_contain_text("Priority class theirs already has value 7")
    assert not PriorityClass.objects.filter(name="batch-rush").exists()
    page.get_by_label("Value").fill("50")
    page.get_by_role("button", name="Save priority class").click()
    expect(page.locator('tr[data-priority-class="batch-rush"]')).to_contain_text("50")
    assert PriorityClass.objects.get(name="batch-rush").value == 50
    assert AuditEvent.objects.filter(action="priority_class.create").count() == 1

    page.context.clear_cookies()
    sign_in(page, base, "bob")
    page.goto(f"{base}/t/acme/clusters/new/")
    select = page.get_by_label("Priority class")
    expect(select).to_be_visible()
    expect(select).to_have_value("normal")  # the default, preselected
    # acme's classes, descriptions shown; not globex's, not the preempting one (an
    # engineer may not pick it).
    expect(select.locator("option")).to_have_text(
        ["batch-rush (50): Before normal work, after deadlines.", "normal (0): Default."]
    )
    page.get_by_label("Name").fill("rushed")
    page.get_by_label("Flavor").select_option("l4")
    select.select_option("batch-rush")
    page.get_by_role("button", name="Request cluster").click()
    page.wait_for_url(f"{base}/t/acme/clusters/rushed/")
    expect(page.locator("dd[data-priority-class]")).to_contain_text("batch-rush")
    assert ClusterRequest.objects.get(name="rushed").priority_class.name == "batch-rush"
