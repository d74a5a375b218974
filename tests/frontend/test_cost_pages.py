"""Showback pages (docs/cost.md): the prices page (platform admins: a 404 for anybody
else; bad input stays on the form and changes nothing), the tenant's cost report (HTML
and CSV) with its caps form (admins only). Browser tests fill and click the visible
price and cap forms."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

import tests.frontend.browser  # noqa: F401  (sets DJANGO_ALLOW_ASYNC_UNSAFE first)
from clusters.models import CostCap, FlavorPrice
from tenants.models import AuditEvent
from tests.factories import usage_span
from tests.frontend.test_browser import sign_in
from tests.frontend.test_csp import Watcher


def client_for(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.django_db
def test_only_platform_admins_reach_the_prices_page(alice: Any, root: Any) -> None:
    assert client_for(alice).get("/platform/prices/").status_code == 404
    assert client_for(root).get("/platform/prices/").status_code == 200


@pytest.mark.django_db
@pytest.mark.parametrize(
    "data",
    [
        {"flavor": "h100", "price_per_gpu_hour": "-1"},
        {"flavor": "nope", "price_per_gpu_hour": "2"},
        {"flavor": "h100", "price_per_gpu_hour": "lots"},
    ],
)
def test_a_bad_price_stays_on_the_form_and_changes_nothing(
    root: Any, h100: Any, data: dict[str, str]
) -> None:
    response = client_for(root).post("/platform/prices/", data)
    assert response.status_code == 400
    assert not FlavorPrice.objects.exists()


@pytest.mark.django_db
def test_a_bad_price_through_the_api_is_a_400_and_a_member_gets_403(
    root: Any, alice: Any, h100: Any, as_user: Any
) -> None:
    bad = as_user(root).post(
        "/api/v1/platform/prices/", {"flavor": "h100", "price_per_gpu_hour": "x"}, format="json"
    )
    assert bad.status_code == 400
    refused = as_user(alice).post(
        "/api/v1/platform/prices/", {"flavor": "h100", "price_per_gpu_hour": "2"}, format="json"
    )
    assert refused.status_code == 403
    made = as_user(root).post(
        "/api/v1/platform/prices/",
        {"flavor": "h100", "price_per_gpu_hour": "2.5", "effective_from": "2026-01-01T00:00Z"},
        format="json",
    )
    assert made.status_code == 201
    assert made.json()["price_per_gpu_hour"] == 2.5 and made.json()["currency"] == "USD"
    assert as_user(alice).get("/api/v1/platform/prices/").json()[0]["flavor"] == "h100"
    assert AuditEvent.objects.filter(action="price.set").count() == 1


@pytest.mark.django_db
def test_caps_are_set_through_the_api_by_admins_only(
    acme: Any, alice: Any, bob: Any, as_user: Any
) -> None:
    body = {"user": "bob", "soft_limit": "10", "hard_limit": "20"}
    assert (
        as_user(bob).put("/api/v1/tenants/acme/cost-caps/", body, format="json").status_code == 403
    )
    bad = {**body, "soft_limit": "30"}
    assert (
        as_user(alice).put("/api/v1/tenants/acme/cost-caps/", bad, format="json").status_code == 400
    )
    stranger = {**body, "user": "mallory"}
    assert (
        as_user(alice).put("/api/v1/tenants/acme/cost-caps/", stranger, format="json").status_code
        == 400
    )
    assert not CostCap.objects.exists()
    done = as_user(alice).put("/api/v1/tenants/acme/cost-caps/", body, format="json")
    assert done.status_code == 200
    (cap,) = done.json()
    assert (cap["user"], cap["soft_limit"], cap["hard_limit"], cap["spent"]) == ("bob", 10, 20, 0)
    shown = as_user(bob).get("/api/v1/tenants/acme/cost-caps/").json()
    assert shown == done.json()
    removed = {"user": "bob", "soft_limit": None, "hard_limit": None}
    assert (
        as_user(alice).put("/api/v1/tenants/acme/cost-caps/", removed, format="json").json() == []
    )


@pytest.mark.django_db
def test_the_report_page_and_csv_of_a_month(
    acme: Any, bob: Any, h100: Any, monkeypatch: Any
) -> None:
    monkeypatch.setattr("django.utils.timezone.now", lambda: datetime(2026, 11, 20, tzinfo=UTC))
    FlavorPrice.objects.create(
        flavor_name="h100",
        price_per_gpu_hour=Decimal(4),
        effective_from=datetime(2026, 1, 1, tzinfo=UTC),
    )
    start = datetime(2026, 10, 3, 8, tzinfo=UTC)
    cluster = usage_span(
        tenant=acme, owner=bob, flavor=h100, gpus=2, start=start, end=start.replace(hour=10)
    )
    client = client_for(bob)
    page = client.get("/t/acme/usage/report/?month=2026-10").content.decode()
    assert "16.00 USD" in page and cluster.name in page
    assert 'id="cap-form"' not in page  # an engineer sets no caps
    csv_text = client.get("/t/acme/usage/report/?month=2026-10&format=csv").content.decode()
    assert "user,bob,,bob,,4.000,16.00,USD" in csv_text
    assert client.get("/t/acme/usage/report/?month=soon").status_code == 400
    assert client.post("/t/acme/usage/report/", {"hard_limit": "5"}).status_code == 403
    assert not CostCap.objects.exists()


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_a_price_is_set_by_filling_the_visible_form(
    page: Any, live_server: Any, browser_env: None, root: Any, h100: Any, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    base = live_server.url
    watcher = Watcher(page)
    sign_in(page, base, "root")
    page.goto(base + "/platform/prices/")
    form = page.locator("#price-form")
    expect(form).to_be_visible()
    form.get_by_label("Flavor").select_option("h100")
    form.get_by_label("Price per GPU-hour", exact=True).fill("2.75")
    page.screenshot(path=str(tmp_path / "prices.png"), full_page=True)
    form.get_by_role("button", name="Save price").click()
    expect(page.locator("#messages")).to_contain_text("Priced h100 at 2.75 USD per GPU-hour.")
    expect(page.locator('[data-price="h100"]')).to_contain_text("in force")
    assert FlavorPrice.objects.get().price_per_gpu_hour == Decimal("2.75")
    watcher.collect("/platform/prices/")
    assert not watcher.problems, "\n".join(watcher.problems)


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_a_cost_cap_is_set_by_filling_the_visible_form(
    page: Any, live_server: Any, browser_env: None, alice: Any, bob: Any
) -> None:
    from playwright.sync_api import expect

    base = live_server.url
    sign_in(page, base, "alice")
    page.goto(base + "/t/acme/usage/report/")
    form = page.locator("#cap-form")
    expect(form).to_be_visible()
    form.get_by_label("Engineer").fill("bob")
    form.get_by_label("Soft limit").fill("100")
    form.get_by_label("Hard limit").fill("150")
    form.get_by_role("button", name="Save cap").click()
    expect(page.locator("#messages")).to_contain_text("Cost cap saved.")
    expect(page.locator('[data-cap="bob"]')).to_contain_text("150")
    cap = CostCap.objects.get()
    assert (cap.username, cap.soft_limit, cap.hard_limit) == ("bob", 100, 150)
