"""The cohort tree page: platform admins see every cohort with its parent, root and
tenants, and set or remove a cohort's parent through the service the API calls; a loop
or a bad name is refused on the form and changes nothing."""

from __future__ import annotations

from html import unescape
from typing import Any

import pytest
from django.test import Client

import tests.frontend.browser  # noqa: F401  (sets DJANGO_ALLOW_ASYNC_UNSAFE first)
from tenants.models import AuditEvent, Cohort
from tenants.selectors import cohort_parents
from tests.factories import TenantFactory
from tests.frontend.test_browser import sign_in
from tests.frontend.test_csp import Watcher, assert_policy_headers

pytestmark = pytest.mark.django_db

URL = "/platform/cohorts/"


def client_for(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def row(html: str, name: str) -> str:
    """The table row of one cohort, unescaped."""
    start = html.index(f'data-cohort="{name}"')
    return unescape(html[start : html.index("</tr>", start)])


def test_the_page_lists_every_cohort_with_its_root_and_tenants(
    root: Any, acme: Any, globex: Any
) -> None:
    TenantFactory(slug="vision", cohort="research")
    Cohort.objects.create(name="research", parent="platform", description="The research org")
    html = client_for(root).get(URL).content.decode()
    assert "a cohort with no parent is a root" in html  # what a parent does, in plain words
    research = row(html, "research")
    assert "platform" in research and "vision" in research and "The research org" in research
    assert "Remove research" in research  # it has a row
    default = row(html, "default")  # only tenants name it: a root, no row to remove
    assert "acme" in default and "globex" in default and "a root" in default
    assert "Remove" not in default
    assert "a root" in row(html, "platform")  # named only as a parent
    assert 'href="/platform/cohorts/"' in html  # the platform tabs link the page


def test_setting_a_parent_creates_the_row_and_changes_the_admission_tree(root: Any) -> None:
    client = client_for(root)
    response = client.post(URL, {"name": "research", "parent": "platform", "description": "R"})
    assert response.status_code == 302 and response["Location"] == URL
    assert cohort_parents() == {"research": "platform"}
    assert AuditEvent.objects.get(action="cohort.create").actor_name == "root"
    page = client.get(URL).content.decode()
    assert "Saved research: its parent is platform." in unescape(page)
    # The row's Edit link fills the form with what the cohort has, description included.
    edit = client.get(URL, {"name": "research"}).content.decode()
    assert 'value="platform"' in edit and 'value="R"' in edit
    # An empty parent makes it a root again; the row stays, with its description.
    client.post(URL, {"name": "research", "parent": "", "description": "R"})
    assert cohort_parents() == {}
    assert Cohort.objects.get(name="research").description == "R"


def test_a_loop_is_refused_with_the_message_and_changes_nothing(root: Any) -> None:
    client = client_for(root)
    client.post(URL, {"name": "research", "parent": "platform"})
    client.post(URL, {"name": "platform", "parent": "org"})
    events = AuditEvent.objects.count()
    refused = client.post(URL, {"name": "org", "parent": "research"})
    assert refused.status_code == 400
    assert (
        "research is below org in the cohort tree: org -> research -> platform -> org."
        in unescape(refused.content.decode())
    )
    assert cohort_parents() == {"research": "platform", "platform": "org"}
    assert not Cohort.objects.filter(name="org").exists()
    assert AuditEvent.objects.count() == events


@pytest.mark.parametrize(
    ("form", "message"),
    [
        ({"name": "Bad_Name", "parent": ""}, "lowercase letters, digits and hyphens"),
        ({"name": "research", "parent": "Bad_Parent"}, "lowercase letters, digits and hyphens"),
        ({"name": "research", "parent": "research"}, "A cohort cannot be its own parent."),
    ],
)
def test_a_bad_name_is_a_form_error_and_changes_nothing(
    root: Any, form: dict[str, str], message: str
) -> None:
    refused = client_for(root).post(URL, form)
    assert refused.status_code == 400
    html = unescape(refused.content.decode())
    assert message in html
    assert "__all__" not in html  # a constraint's error reads as a sentence above the form
    assert not Cohort.objects.exists() and not AuditEvent.objects.exists()


def test_removing_a_cohort_makes_it_a_root_again(root: Any) -> None:
    client = client_for(root)
    client.post(URL, {"name": "research", "parent": "platform"})
    removed = client.post(f"{URL}research/delete/", follow=True)
    assert removed.status_code == 200
    assert "Removed research" in unescape(removed.content.decode())
    assert cohort_parents() == {} and not Cohort.objects.exists()
    assert AuditEvent.objects.filter(action="cohort.delete").count() == 1
    # A cohort without a row has nothing to remove.
    assert client.post(f"{URL}research/delete/").status_code == 404
    assert client.get(f"{URL}research/delete/").status_code == 405


def test_only_platform_admins_see_or_change_the_tree(alice: Any, bob: Any) -> None:
    Cohort.objects.create(name="research", parent="platform")
    for user in (alice, bob):  # a tenant admin and an engineer: the page does not exist
        client = client_for(user)
        assert client.get(URL).status_code == 404
        assert client.post(URL, {"name": "research", "parent": ""}).status_code == 404
        assert client.post(f"{URL}research/delete/").status_code == 404
    anonymous = Client()
    for response in (anonymous.get(URL), anonymous.post(f"{URL}research/delete/")):
        assert response.status_code == 302 and response["Location"].startswith("/login/")
    assert cohort_parents() == {"research": "platform"}
    assert not AuditEvent.objects.exists()


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_page_renders_without_a_policy_violation(
    page: Any, live_server: Any, browser_env: None, root: Any, acme: Any
) -> None:
    """The page under the Content-Security-Policy, as test_csp checks the others, and its
    form and remove button used in the browser."""
    from playwright.sync_api import expect

    base = live_server.url
    watcher = Watcher(page)
    sign_in(page, base, "root")
    assert_policy_headers(URL, watcher.visit(base + URL))
    page.get_by_label("Name").fill("default")
    page.get_by_label("Parent").fill("platform")
    page.get_by_role("button", name="Save cohort").click()
    page.wait_for_url(base + URL)
    expect(page.locator("#messages")).to_contain_text("its parent is platform")
    expect(page.locator('tr[data-cohort="default"]')).to_contain_text("acme")
    page.once("dialog", lambda dialog: dialog.accept())  # it asks first
    page.get_by_role("button", name="Remove default").click()
    expect(page.locator("#messages")).to_contain_text("Removed default")
    watcher.collect(URL)
    assert not watcher.problems, "\n".join(watcher.problems)
    assert cohort_parents() == {}
