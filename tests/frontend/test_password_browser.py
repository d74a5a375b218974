"""Passwords in a real browser, through visible controls: change your own, a platform
admin's temporary password that must be changed at the next sign-in, and a reset by
email read from a real SMTP server on loopback (aiosmtpd), whose link is followed."""

from __future__ import annotations

import email
import re
from collections.abc import Iterator
from typing import Any

import pytest

import tests.frontend.browser  # noqa: F401  (sets DJANGO_ALLOW_ASYNC_UNSAFE first)
from tenants.models import AuditEvent
from tests.frontend.test_browser import PASSWORD
from tests.mail_server import Inbox, smtp_server

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

MINE = "a-long-unusual-passphrase-42"


def sign_in(page: Any, base: str, username: str, password: str) -> None:
    page.goto(f"{base}/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()


def sign_out(page: Any) -> None:
    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url(re.compile(r"/login/"))


def change_password(page: Any, old: str, new: str) -> None:
    page.get_by_label("Old password").fill(old)
    page.get_by_label("New password", exact=True).fill(new)
    page.get_by_label("New password again").fill(new)
    page.get_by_role("button", name="Change password").click()


def test_change_your_own_password(page: Any, live_server: Any, browser_env: None, bob: Any) -> None:
    from playwright.sync_api import expect

    base = live_server.url
    sign_in(page, base, "bob", PASSWORD)
    page.wait_for_url(f"{base}/")
    page.get_by_role("link", name="Password").click()
    expect(page.get_by_role("heading", name="Change your password")).to_be_visible()
    # The validators' words come back next to the field.
    change_password(page, PASSWORD, "12345678")
    expect(page.locator(".has-error")).to_contain_text("too common")
    change_password(page, PASSWORD, MINE)
    page.wait_for_url(f"{base}/")
    expect(page.locator("#messages")).to_contain_text("Your password is changed")
    expect(page.get_by_role("heading", name="Your tenants")).to_be_visible()  # still in
    sign_out(page)
    sign_in(page, base, "bob", MINE)
    page.wait_for_url(f"{base}/")
    assert AuditEvent.objects.filter(action="user.password_change", actor=bob).count() == 1


def test_an_admins_temporary_password_must_be_changed_at_sign_in(
    browser: Any, live_server: Any, browser_env: None, root: Any, bob: Any
) -> None:
    from playwright.sync_api import expect

    base = live_server.url
    admin = browser.new_context().new_page()
    sign_in(admin, base, "root", PASSWORD)
    admin.wait_for_url(f"{base}/")
    admin.goto(f"{base}/platform/users/")
    row = admin.locator("tr[data-user=bob]")
    row.get_by_text("Password of bob").click()
    row.get_by_label("Temporary password for bob").fill("temporary-phrase-1234")
    row.get_by_role("button", name="Set temporary password").click()
    expect(admin.locator("#messages")).to_contain_text("bob has a temporary password")

    page = browser.new_context().new_page()
    sign_in(page, base, "bob", "temporary-phrase-1234")
    page.wait_for_url(f"{base}/account/password/")
    expect(page.locator("[data-must-change]")).to_be_visible()
    # Any other page sends them back here until they have chosen their own.
    page.goto(f"{base}/t/acme/")
    page.wait_for_url(f"{base}/account/password/")
    change_password(page, "temporary-phrase-1234", MINE)
    page.wait_for_url(f"{base}/")
    page.goto(f"{base}/t/acme/")
    expect(page.get_by_role("navigation", name="Acme Research")).to_be_visible()
    assert page.url == f"{base}/t/acme/"


@pytest.fixture
def smtp(settings: Any) -> Iterator[Inbox]:
    with smtp_server(settings) as (inbox, _):
        yield inbox


def test_reset_by_email_through_a_real_mail_server(
    page: Any, live_server: Any, browser_env: None, smtp: Inbox, bob: Any
) -> None:
    from playwright.sync_api import expect

    base = live_server.url
    page.goto(f"{base}/login/")
    page.get_by_role("link", name="Forgot your password?").click()
    page.get_by_label("Email").fill(bob.email)
    page.get_by_role("button", name="Mail me a link").click()
    expect(page.get_by_role("heading", name="Check your mail")).to_be_visible()
    ((_, _, raw),) = smtp.messages
    message = email.message_from_bytes(raw)
    assert message["To"] == bob.email
    body = bytes(message.get_payload(decode=True)).decode()
    link = re.search(r"http://\S+/password-reset/\S+/\S+/", body)
    assert link, body
    page.goto(link.group(0))  # the person opens the link from their mail
    page.get_by_label("New password", exact=True).fill(MINE)
    page.get_by_label("New password confirmation").fill(MINE)
    page.get_by_role("button", name="Set password").click()
    expect(page.get_by_role("heading", name="Your password is set")).to_be_visible()
    page.get_by_role("link", name="Sign in").click()
    sign_in(page, base, "bob", MINE)
    page.wait_for_url(f"{base}/")
    assert AuditEvent.objects.filter(action="user.password_reset", actor=bob).count() == 1
