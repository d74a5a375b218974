"""Single sign-on in a real browser against a real OpenID provider (tests/oidc).

One engineer's story: the first sign-in through the provider creates her account with
the role her groups map to; leaving the group at the provider takes the tenant away at
her next page (its pages are 404s) without signing in again; a later sign-in after
another group change brings the new role; signing out ends the provider's session too
(the next sign-in asks for her password again); off-boarding at the provider ends the
gangway session at the next request.
"""

from __future__ import annotations

from typing import Any

import pytest

import tests.frontend.browser  # noqa: F401  (sets DJANGO_ALLOW_ASYNC_UNSAFE first)
from tenants.models import AuditEvent, Membership
from tests.tenants.sso.conftest import sso_settings

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def provider_sign_in(page: Any, username: str) -> None:
    """On the provider's own sign-in page, as the engineer would."""
    page.wait_for_url("**/accounts/login/**")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill("password")
    page.get_by_role("button", name="Sign in").click()


def test_sign_in_roles_follow_the_groups_and_sign_out_ends_both_sessions(
    page: Any,
    live_server: Any,
    browser_env: None,
    settings: Any,
    oidc_provider: Any,
    acme: Any,
    globex: Any,
) -> None:
    from playwright.sync_api import expect

    base = live_server.url
    sso_settings(settings, oidc_provider)
    oidc_provider.set_redirect_uris([f"{base}/sso/callback/"], [f"{base}/login/"])
    oidc_provider.create_user("ann", groups=["gpu-acme-engineers"])

    # First sign-in: the account is created with the mapped role.
    page.goto(f"{base}/t/acme/")
    page.wait_for_url("**/login/**")
    page.get_by_role("link", name="Sign in with Test IdP").click()
    provider_sign_in(page, "ann")
    page.wait_for_url(f"{base}/t/acme/")
    expect(page.get_by_text("ann \u00b7 engineer")).to_be_visible()
    membership = Membership.objects.get(user__username="ann")
    assert (membership.tenant.slug, membership.role, membership.source) == (
        "acme",
        "engineer",
        "provider",
    )

    # Leaving the group at the provider takes the tenant away at the next page.
    oidc_provider.set_groups("ann", ["gpu-globex-viewers"])
    gone = page.goto(f"{base}/t/acme/")
    assert gone is not None and gone.status == 404
    assert page.goto(f"{base}/t/globex/").status == 200
    assert not Membership.objects.filter(user__username="ann", tenant__slug="acme").exists()

    # Sign out: gangway's session and the provider's end, so the next sign-in asks again.
    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url(f"{base}/login/**")
    expect(page.get_by_role("link", name="Sign in with Test IdP")).to_be_visible()
    assert page.goto(f"{base}/t/globex/").url.startswith(f"{base}/login/")

    # A later sign-in after a group change brings the new role.
    oidc_provider.set_groups("ann", ["gpu-acme-admins"])
    page.get_by_role("link", name="Sign in with Test IdP").click()
    provider_sign_in(page, "ann")  # asked again: the provider's session had ended
    page.wait_for_url(f"{base}/t/globex/")  # where she was going; it is 404 now
    page.goto(f"{base}/t/acme/members/")
    expect(page.get_by_role("heading", name="Members of Acme Research")).to_be_visible()
    row = page.locator("tr[data-member='ann']")
    expect(row.get_by_text("identity provider", exact=True)).to_be_visible()
    expect(row.get_by_role("button", name="Remove")).to_have_count(0)

    # Off-boarding at the provider ends this session at the next request.
    oidc_provider.deactivate("ann")
    page.goto(f"{base}/t/acme/")
    page.wait_for_url(f"{base}/login/**")
    expect(page.get_by_text("session has ended")).to_be_visible()
    actions = set(AuditEvent.objects.values_list("action", flat=True))
    assert {"user.sso_create", "membership.sso_add", "membership.sso_remove"} <= actions
