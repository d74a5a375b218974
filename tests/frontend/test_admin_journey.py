"""The administrators' journeys in a real browser: a platform admin sets up a tenant
(its quota previewed before it is saved) and gives it an admin; that admin adds an
engineer and moves one of the engineer's queued requests to the front; the capacity page
shows what the tenant holds; and on a phone the queue reads as one card per request."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model

import tests.frontend.browser  # noqa: F401  (sets DJANGO_ALLOW_ASYNC_UNSAFE first)
from clusters.domain.states import State
from clusters.models import ClusterRequest
from clusters.queue.admission_pass import run_admission_pass
from clusters.requests import services as requests
from clusters.rows.spec import ClusterSpec
from tenants import services
from tenants.models import Membership, Quota, Role, Tenant
from tests.frontend.test_browser import PASSWORD, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def switch_user(page: Any, base: str, username: str) -> None:
    """Sign out (the session cookie goes) and sign in as somebody else."""
    page.context.clear_cookies()
    sign_in(page, base, username)


def test_a_platform_admin_sets_up_a_tenant_with_a_quota_and_an_admin(
    page: Any, live_server: Any, browser_env: None, root: Any, h100: Any, l4: Any
) -> None:
    from playwright.sync_api import expect

    base = live_server.url
    sign_in(page, base, "root")

    # A new tenant: its namespace is derived from the slug, never typed.
    page.goto(f"{base}/platform/tenants/")
    page.get_by_label("Slug").fill("speech")
    page.get_by_label("Name", exact=True).fill("Speech Research")
    page.get_by_role("button", name="Create tenant").click()
    page.wait_for_url(f"{base}/platform/tenants/speech/")
    expect(page.locator("h1")).to_contain_text("Speech Research")
    expect(page.locator("main p.muted code").first).to_have_text("gw-speech")
    assert Tenant.objects.unscoped().get(slug="speech").namespace == "gw-speech"

    # More H100s than the fleet has: the preview warns as it is typed, before saving.
    preview = page.locator("#quota-preview")
    expect(preview.locator("[data-preview]")).to_be_visible()
    expect(preview.locator("[data-warning]")).to_have_count(0)
    page.get_by_label("h100 nominal GPUs").fill("400")
    warning = preview.locator("[data-warning]")
    expect(warning.first).to_be_visible()
    expect(preview.locator("tr.over")).to_contain_text("h100")
    assert not Quota.objects.filter(tenant__slug="speech").exists()  # nothing saved yet

    # A sane quota: the warning goes, and saving keeps it.
    page.get_by_label("h100 nominal GPUs").fill("8")
    expect(warning).to_have_count(0)
    page.get_by_label("CPU cores (0: no quota)").fill("1000")
    page.get_by_label("Memory GiB (0: no quota)").fill("8000")
    page.get_by_role("button", name="Save quota").click()
    page.wait_for_url(f"{base}/platform/tenants/speech/")
    expect(page.locator("#messages")).to_contain_text("Saved the quota of speech.")
    expect(page.get_by_label("h100 nominal GPUs")).to_have_value("8")
    quota = Quota.objects.get(tenant__slug="speech")
    assert (quota.flavor.name, quota.gpus, quota.borrow_limit) == ("h100", 8, 0)

    # An account for the tenant's admin, then the admin role in speech.
    page.goto(f"{base}/platform/users/")
    page.get_by_label("Username").fill("sam")
    page.get_by_label("Email").fill("sam@example.com")
    page.get_by_label("Password").fill(PASSWORD)
    # The checkbox sits before its label, not stretched across the form.
    admin_box = page.get_by_role("checkbox", name="Platform admin").bounding_box()
    assert admin_box is not None and admin_box["width"] < 40, admin_box
    page.get_by_role("button", name="Create user").click()
    page.wait_for_url(f"{base}/platform/users/")
    expect(page.locator('[data-user="sam"]')).to_contain_text("none")

    page.goto(f"{base}/t/speech/members/")
    page.get_by_label("Username").fill("sam")
    page.get_by_label("Role", exact=True).select_option("admin")
    page.get_by_role("button", name="Add member").click()
    page.wait_for_url(f"{base}/t/speech/members/")
    expect(page.locator('[data-member="sam"]')).to_be_visible()
    assert Membership.objects.get(tenant__slug="speech", user__username="sam").role == Role.ADMIN
    # The tenant's page lists its new admin too.
    page.goto(f"{base}/platform/tenants/speech/")
    expect(page.get_by_role("region", name="Members")).to_contain_text("sam")


@pytest.fixture
def speech(root: Any, h100: Any, l4: Any) -> Tenant:
    """What the first journey leaves behind, made by the same services: speech with 8
    H100s of its own (nothing to borrow) and sam its admin."""
    tenant = services.tenant_create(actor=root, slug="speech", name="Speech Research")
    services.quota_set(
        actor=root,
        tenant=tenant,
        flavors=[services.QuotaLine(flavor="h100", gpus=8, borrow_limit=0)],
        cpu=1000,
        memory_gib=8000,
    )
    services.user_create(actor=root, username="sam", email="", password=PASSWORD)
    services.user_create(actor=root, username="erin", email="", password=PASSWORD)
    services.membership_add(actor=root, tenant=tenant, username="sam", role=Role.ADMIN)
    tenant.refresh_from_db()
    return tenant


def test_a_tenant_admin_adds_an_engineer_and_reorders_the_queue(
    page: Any, live_server: Any, browser_env: None, speech: Tenant, h100: Any
) -> None:
    from playwright.sync_api import expect

    base = live_server.url
    sign_in(page, base, "sam")
    page.goto(f"{base}/t/speech/members/")
    page.get_by_label("Username").fill("erin")
    page.get_by_label("Role", exact=True).select_option("engineer")
    page.get_by_role("button", name="Add member").click()
    page.wait_for_url(f"{base}/t/speech/members/")
    expect(page.locator('[data-member="erin"]')).to_be_visible()

    # sam's one-node production cluster fills speech's 8 H100s; erin's two then wait.
    sam, erin = (get_user_model().objects.get(username=u) for u in ("sam", "erin"))

    def ask(actor: Any, name: str, kind: str) -> ClusterRequest:
        spec = ClusterSpec(name=name, kind=kind, flavor=h100, workers=1)
        return requests.cluster_request_create(actor=actor, tenant=speech, spec=spec)

    ask(sam, "asr-train", "prod")
    run_admission_pass()
    assert ClusterRequest.objects.get(name="asr-train").state == State.ADMITTED
    ask(erin, "erin-first", "dev")
    ask(erin, "erin-second", "dev")
    run_admission_pass()

    page.goto(f"{base}/t/speech/queue/")
    rows = page.locator("#queue-rows tbody tr[data-request]")
    expect(rows).to_have_count(2)
    expect(rows.nth(0)).to_have_attribute("data-request", "erin-first")
    expect(rows.nth(0).locator("td").first).to_have_text("1")

    # sam moves the second request up, saying why; the reason reaches its owner.
    page.locator('[data-request="erin-second"]').get_by_role("link", name="Manage").click()
    page.wait_for_url(f"{base}/t/speech/clusters/erin-second/manage/")
    expect(page.locator("h1")).to_have_text("Manage erin-second")
    # Priority and hold each ask for a reason: every label names its own field.
    ids = page.locator("[id]").evaluate_all("els => els.map(e => e.id)")
    assert len(ids) == len(set(ids)), sorted(ids)
    expect(page.get_by_label("Reason")).to_have_count(2)
    priority = page.locator("form", has=page.get_by_role("heading", name="Priority"))
    priority.get_by_label("Priority").fill("10")
    priority.get_by_label("Reason").fill("demo for the board on Friday")
    priority.get_by_role("button", name="Set priority").click()
    page.wait_for_url(f"{base}/t/speech/queue/")
    expect(page.locator("#messages")).to_contain_text("Priority changed.")
    run_admission_pass()
    page.reload()
    expect(rows.nth(0)).to_have_attribute("data-request", "erin-second")
    expect(rows.nth(0).locator("td").first).to_have_text("1")
    expect(rows.nth(0).locator('td[data-label="Priority"]')).to_have_text("10")
    expect(page.locator('[data-request="erin-first"] td').first).to_have_text("2")
    assert ClusterRequest.objects.get(name="erin-second").priority == 10

    switch_user(page, base, "erin")
    page.goto(f"{base}/t/speech/clusters/erin-second/")
    expect(page.get_by_text("demo for the board on Friday")).to_be_visible()
    # erin is an engineer: no Manage link for her, and the page itself says no.
    page.goto(f"{base}/t/speech/queue/")
    expect(page.locator("#queue-rows tbody tr[data-request]")).to_have_count(2)
    expect(page.get_by_role("link", name="Manage")).to_have_count(0)


def test_capacity_shows_what_a_tenant_holds_and_the_queue_fits_a_phone(
    page: Any, live_server: Any, browser_env: None, speech: Tenant, h100: Any
) -> None:
    from playwright.sync_api import expect

    sam = speech.memberships.get(role=Role.ADMIN).user
    for name, kind in (("asr-train", "prod"), ("asr-eval", "prod")):
        spec = ClusterSpec(name=name, kind=kind, flavor=h100, workers=1)
        requests.cluster_request_create(actor=sam, tenant=speech, spec=spec)
    run_admission_pass()
    assert ClusterRequest.objects.get(name="asr-eval").state == State.QUEUED

    base = live_server.url
    sign_in(page, base, "root")
    page.goto(f"{base}/capacity/")
    row = page.locator('[data-flavor="h100"]')
    expect(row.locator("[data-total]")).to_have_text("32")
    expect(row.locator("[data-allocated]")).to_have_text("8")
    expect(row.locator("[data-free]")).to_contain_text("24")
    expect(row.locator('[data-held="speech"]')).to_contain_text("speech 8")
    expect(row.locator("[data-waiting]")).to_contain_text("8")
    expect(page.locator('[data-flavor="l4"] [data-allocated]')).to_have_text("0")
    # No Kubernetes runs here: the node grid says so instead of failing the page.
    expect(page.locator("[data-nodes-error]")).to_be_visible()

    # On a phone the queue's header row is hidden and every request is a card.
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{base}/t/speech/queue/")
    table = page.locator("#queue-rows table.responsive")
    expect(table.locator('tr[data-request="asr-eval"]')).to_be_visible()
    header = table.locator("thead")
    box = header.bounding_box()
    assert box is not None and box["width"] * box["height"] <= 1, box
    assert header.evaluate("e => getComputedStyle(e).position") == "absolute"
    cell = table.locator('tr[data-request="asr-eval"] td').first
    assert cell.evaluate("e => getComputedStyle(e).display") == "block"
    assert (
        table.locator("tr[data-request]").first.evaluate("e => getComputedStyle(e).display")
        == "block"
    )
    # Each cell carries its column's name, shown before it in place of the header.
    label = cell.evaluate("e => getComputedStyle(e, '::before').content")
    assert label == '"#"'
    # On a card every value reads from the left, numbers too.
    assert cell.evaluate("e => getComputedStyle(e).textAlign") in ("left", "start")
    # Nothing spills sideways: the page is no wider than the phone.
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
