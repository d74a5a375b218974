"""A platform admin creating a tenant with a slug the rule refuses, in a real browser: the
error under the field says what the help beside it says, and no tenant is made."""

from __future__ import annotations

from typing import Any

import pytest

import tests.frontend.browser  # noqa: F401  (sets DJANGO_ALLOW_ASYNC_UNSAFE first)
from tenants.models import Tenant
from tenants.slugs import SLUG_HELP
from tests.frontend.test_browser import sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_refused_slug_is_told_what_the_help_says(
    page: Any, live_server: Any, browser_env: None, root: Any
) -> None:
    from playwright.sync_api import expect

    base = live_server.url
    sign_in(page, base, "root")
    page.goto(f"{base}/platform/tenants/")
    field = page.locator(".field", has=page.get_by_label("Slug"))
    expect(field.locator("p.help")).to_contain_text(SLUG_HELP)

    page.get_by_label("Slug").fill("kube-ml")
    page.get_by_label("Name", exact=True).fill("ML Platform")
    page.get_by_role("button", name="Create tenant").click()

    field = page.locator(".field", has=page.get_by_label("Slug"))
    expect(field.locator(".error")).to_have_text(SLUG_HELP)
    expect(field.locator("p.help")).to_contain_text(SLUG_HELP)
    expect(page.get_by_label("Slug")).to_have_value("kube-ml")
    assert not Tenant.objects.unscoped().exists()
