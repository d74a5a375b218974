"""The Mail page in a real browser: with make run's mail sink configured, a user finds
the header's Mail link, opens the mail gangway sent them and reads it."""

from __future__ import annotations

from typing import Any

import pytest

import tests.frontend.browser  # noqa: F401  (sets DJANGO_ALLOW_ASYNC_UNSAFE first)
from clusters.rows.transitions import transition
from notifications import outbox, tasks
from tests.frontend.test_browser import sign_in
from tests.notifications.conftest import MailSink, fast_notify, mail_sink, make_cluster

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
__all__ = ["fast_notify", "mail_sink"]  # the fixtures this module uses


def test_a_user_reads_their_mail_through_the_header_link(
    page: Any, live_server: Any, browser_env: None, mail_sink: MailSink, acme: Any, bob: Any
) -> None:
    from playwright.sync_api import expect

    transition(make_cluster(acme, bob, state="ready"), "failed", reason="error", message="OOM")
    for pk in outbox.dispatch_pass().created:
        tasks.deliver.apply(args=[pk])
    [kept] = mail_sink.files()

    base = live_server.url
    sign_in(page, base, "bob")
    page.get_by_role("link", name="Mail", exact=True).click()
    page.wait_for_url(f"{base}/mail/")
    expect(page.get_by_role("heading", name="Mail")).to_be_visible()
    page.get_by_role("link", name="Cluster bob-dev in acme: cluster failed").click()
    page.wait_for_url(f"{base}/mail/{kept.name}/")
    expect(page.locator("pre.mail-body")).to_contain_text("OOM")
    expect(page.locator("pre.mail-body")).to_contain_text("/t/acme/clusters/bob-dev/")
