"""A session that ends while a page is open: the partials htmx fetches send the browser
to sign in (``next`` set to the page), never swap the sign-in page into a panel, and a
form's values survive the round trip."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from django.contrib.sessions.models import Session
from django.test import Client

import tests.frontend.browser  # noqa: F401  (sets DJANGO_ALLOW_ASYNC_UNSAFE first)
from tests.frontend.test_browser import PASSWORD, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def signed_out_to(page: Any, base: str, where: str) -> None:
    """The window is on the sign-in page, asked to come back to ``where``."""
    page.wait_for_url(f"{base}/login/?*")
    assert parse_qs(urlsplit(page.url).query)["next"] == [where]
    assert page.locator("#verdict, #queue-rows").count() == 0


def sign_in_again(page: Any, base: str, username: str, where: str) -> None:
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(base + where)


def open_tenant_page(page: Any, base: str, username: str, link: str) -> None:
    """Sign in and follow the tenant's navigation to ``link``."""
    sign_in(page, base, username)
    page.get_by_role("link", name="Acme Research").click()
    page.get_by_role("navigation", name="Acme Research").get_by_role("link", name=link).click()


def test_the_new_cluster_form_survives_a_session_that_ended(
    page: Any, live_server: Any, browser_env: None, bob: Any
) -> None:
    from playwright.sync_api import expect

    base = live_server.url
    open_tenant_page(page, base, "bob", "New cluster")
    verdict = page.locator("#verdict [data-verdict]")
    page.get_by_label("Name").fill("bob-kept")
    page.get_by_label("Flavor").select_option("l4")
    # Leaving the field (not pressing Tab) asks only on change: a Tab's keyup would ask
    # again 300 ms later (the form's `keyup delay:300ms`), and on a busy machine that
    # second ask could land after the session below ended, before the new value is typed.
    page.get_by_label("Workers").fill("3")
    page.get_by_label("Workers").blur()
    expect(verdict).to_have_attribute("data-verdict", "never_fits")

    Session.objects.all().delete()  # the session ends (expired, or signed out elsewhere)
    page.get_by_label("Workers").fill("2")
    page.get_by_label("Workers").blur()
    signed_out_to(page, base, "/t/acme/clusters/new/")

    sign_in_again(page, base, "bob", "/t/acme/clusters/new/")
    expect(page.get_by_label("Name")).to_have_value("bob-kept")
    expect(page.get_by_label("Flavor")).to_have_value("l4")
    expect(page.get_by_label("Workers")).to_have_value("2")
    # The panel asks again, for what was put back: two L4s are acme's whole quota.
    expect(verdict).not_to_have_attribute("data-verdict", "never_fits")
    expect(verdict).to_be_visible()


def test_the_polled_queue_sends_a_signed_out_browser_to_sign_in(
    page: Any, live_server: Any, browser_env: None, bob: Any
) -> None:
    from playwright.sync_api import expect

    base = live_server.url
    open_tenant_page(page, base, "bob", "Queue")
    expect(page.locator("#queue-rows")).to_be_visible()

    Session.objects.all().delete()
    # The table polls every 5 s: its next request finds no session.
    page.wait_for_url(f"{base}/login/?*", timeout=20_000)
    signed_out_to(page, base, "/t/acme/queue/")
    sign_in_again(page, base, "bob", "/t/acme/queue/")
    expect(page.locator("#queue-rows")).to_be_visible()


def test_a_signed_out_htmx_request_gets_a_redirect_htmx_follows(db: Any) -> None:
    """The server's half, for a POST (the verdict) and a GET (a polled table)."""
    client = Client()
    headers = {
        "HX-Request": "true",
        "HX-Current-URL": "http://testserver/t/acme/clusters/new/?flavor=l4",
    }
    for response in (
        client.post("/t/acme/clusters/new/verdict/", {"workers": 1}, headers=headers),
        client.get("/t/acme/queue/", headers=headers),
    ):
        assert response.status_code == 200 and response.content == b""
        assert (
            response["HX-Redirect"] == "/login/?next=%2Ft%2Facme%2Fclusters%2Fnew%2F%3Fflavor%3Dl4"
        )
    # Another site's address is not a page to come back to.
    foreign = {**headers, "HX-Current-URL": "https://evil.example/phish"}
    response = client.get("/t/acme/queue/", headers=foreign)
    assert response["HX-Redirect"] == "/login/?next=%2F"
    # Without htmx, the sign-in redirect stays what it was.
    response = client.get("/t/acme/queue/")
    assert response.status_code == 302 and response["Location"].startswith("/login/?next=")
