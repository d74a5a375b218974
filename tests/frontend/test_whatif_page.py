"""The what-if page runs a comparison for a platform admin and says what it cannot use.

Who may open it is in the access matrix (tests/access/routes_frontend.py) and the CSP walk
renders it. Runtime: about 3 s (a synthetic tenth of a day, twice).
"""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

import tests.frontend.browser  # noqa: F401  (sets DJANGO_ALLOW_ASYNC_UNSAFE first)

URL = "/platform/whatif/"


@pytest.mark.django_db
def test_a_platform_admin_compares_a_changed_world(client: Client, root: Any) -> None:
    client.force_login(root)
    response = client.get(
        URL,
        {"run": "1", "source": "synthetic", "days": "0.1", "seed": "3", "changes": "nodes:h100=-8"},
    )
    assert response.status_code == 200
    page = response.content.decode()
    assert "<svg" in page and 'class="chart-s1"' in page
    assert "GPU allocation while oversubscribed" in page and "team00" in page
    assert "<code>nodes:h100=-8</code>" in page
    assert "What it does not model" in page


@pytest.mark.django_db
def test_a_change_it_cannot_read_is_shown_on_the_form(client: Client, root: Any) -> None:
    client.force_login(root)
    response = client.get(URL, {"run": "1", "source": "synthetic", "changes": "nodes:h200=+1"})
    assert response.status_code == 200
    page = response.content.decode()
    assert "No flavor called" in page and "h200" in page
    assert "GPU allocation while oversubscribed" not in page


@pytest.mark.django_db
def test_a_recorded_period_with_nothing_in_it_still_renders(client: Client, root: Any) -> None:
    client.force_login(root)
    response = client.get(URL, {"run": "1", "source": "recorded"})
    assert response.status_code == 200
    assert "0 requests" in response.content.decode()


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_planner_is_run_from_its_form_in_a_browser(
    page: Any, live_server: Any, browser_env: None, root: Any, h100: Any
) -> None:
    """The form is seen and used as a person would: from the platform's tabs, its fields
    filled, Compare clicked."""
    from playwright.sync_api import expect

    from tests.frontend.test_browser import sign_in

    base = live_server.url
    sign_in(page, base, "root")
    page.goto(f"{base}/platform/tenants/")
    page.get_by_role("navigation", name="Platform administration").get_by_role(
        "link", name="What-if"
    ).click()
    page.get_by_label("Source").select_option("synthetic")
    page.get_by_label("Days").fill("0.1")
    page.get_by_label("Seed").fill("3")
    page.get_by_label("Changes").fill("nodes:h100=-8")
    page.get_by_role("button", name="Compare").click()
    expect(page.locator("code", has_text="nodes:h100=-8")).to_be_visible(timeout=60_000)
    expect(page.get_by_role("img", name="Mean wait per tenant, as is and changed")).to_be_visible()
