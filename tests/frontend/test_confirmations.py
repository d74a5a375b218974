"""Destructive buttons ask first, as a cluster's Delete does: saying no changes nothing,
saying yes does it. (That every destructive button on every page asks is checked by the
walk in test_visible_controls; these follow two of them through.)"""

from __future__ import annotations

from typing import Any

import pytest

import tests.frontend.browser  # noqa: F401  (sets DJANGO_ALLOW_ASYNC_UNSAFE first)
from tenants.models import Membership
from tests.frontend.test_browser import sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def click_and_answer(page: Any, button: Any, *, accept: bool) -> str:
    """Click ``button``, answer its question; return the question."""
    asked: list[str] = []

    def answer(dialog: Any) -> None:
        asked.append(dialog.message)
        dialog.accept() if accept else dialog.dismiss()

    page.once("dialog", answer)
    button.click()
    page.wait_for_load_state()
    assert asked, "the button did not ask first"
    return asked[0]


def test_removing_a_member_asks_first(
    page: Any, live_server: Any, browser_env: None, alice: Any, vera: Any
) -> None:
    from playwright.sync_api import expect

    base = live_server.url
    sign_in(page, base, "alice")
    page.get_by_role("link", name="Acme Research").click()
    page.get_by_role("navigation", name="Acme Research").get_by_role("link", name="Members").click()
    row = page.locator('tr[data-member="vera"]')
    question = click_and_answer(page, row.get_by_role("button", name="Remove"), accept=False)
    assert question.startswith("Remove vera from Acme Research?")
    assert Membership.objects.filter(user=vera).exists()
    click_and_answer(page, row.get_by_role("button", name="Remove"), accept=True)
    expect(page.locator('tr[data-member="vera"]')).to_have_count(0)
    assert not Membership.objects.filter(user=vera).exists()


def test_deactivating_a_user_asks_first(
    page: Any, live_server: Any, browser_env: None, root: Any, bob: Any
) -> None:
    from playwright.sync_api import expect

    base = live_server.url
    sign_in(page, base, "root")
    page.get_by_role("navigation", name="Platform").get_by_role("link", name="Admin").click()
    page.get_by_role("navigation", name="Platform administration").get_by_role(
        "link", name="Users"
    ).click()
    row = page.locator('tr[data-user="bob"]')
    question = click_and_answer(page, row.get_by_role("button", name="Deactivate"), accept=False)
    assert question.startswith("Deactivate bob?")
    bob.refresh_from_db()
    assert bob.is_active
    click_and_answer(page, row.get_by_role("button", name="Deactivate"), accept=True)
    expect(
        page.locator('tr[data-user="bob"]').get_by_role("button", name="Activate")
    ).to_be_visible()
    bob.refresh_from_db()
    assert not bob.is_active
