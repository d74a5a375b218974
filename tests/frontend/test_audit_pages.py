"""The audit log pages: every event for platform admins (``/audit/``), one tenant's for
its admins (``/t/<slug>/audit/``), filtered with the API's FilterSet, newest first,
paged, at a query count that does not grow with the events."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

import tests.frontend.browser  # noqa: F401  (sets DJANGO_ALLOW_ASYNC_UNSAFE first)
from tenants.models import AuditEvent

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


def event(*, actor: str, tenant: Any, action: str, kind: str, pk: str, minutes: int) -> AuditEvent:
    row = AuditEvent.objects.create(
        actor_name=actor,
        action=action,
        tenant=tenant,
        tenant_slug=tenant.slug if tenant else "",
        object_type=kind,
        object_id=pk,
        object_repr=f"{kind} {pk}",
    )
    # ``at`` is set on insert; the log's own time is what the filters read.
    AuditEvent.objects.filter(pk=row.pk).update(at=T0 + timedelta(minutes=minutes))
    return row


@pytest.fixture
def log(acme: Any, globex: Any) -> dict[str, AuditEvent]:
    AuditEvent.objects.all().delete()  # the fixtures' own writes are not this test's
    return {
        "a1": event(
            actor="alice", tenant=acme, action="member.add", kind="membership", pk="bob", minutes=0
        ),
        "a2": event(
            actor="bob", tenant=acme, action="cluster.create", kind="cluster", pk="7", minutes=10
        ),
        "a3": event(
            actor="bob", tenant=acme, action="cluster.delete", kind="cluster", pk="7", minutes=20
        ),
        "g1": event(
            actor="charlie",
            tenant=globex,
            action="cluster.create",
            kind="cluster",
            pk="9",
            minutes=15,
        ),
        "p1": event(
            actor="root",
            tenant=None,
            action="flavor.update",
            kind="gpuflavor",
            pk="h100",
            minutes=30,
        ),
    }


def client_for(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def shown(response: Any) -> list[int]:
    """The ids of the events on the page, in the page's order."""
    assert response.status_code == 200
    return [int(pk) for pk in re.findall(r'<tr data-event="(\d+)">', response.content.decode())]


def ids(log: dict[str, AuditEvent], *names: str) -> list[int]:
    return [log[name].pk for name in names]


def test_platform_admins_see_every_event_newest_first(root: Any, log: Any) -> None:
    assert shown(client_for(root).get("/audit/")) == ids(log, "p1", "a3", "g1", "a2", "a1")


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("actor=bob", ["a3", "a2"]),
        ("tenant=globex", ["g1"]),
        ("action=cluster.create", ["g1", "a2"]),
        # The start of an action finds every action of its kind.
        ("action=cluster", ["a3", "g1", "a2"]),
        ("object_type=cluster&object_id=7", ["a3", "a2"]),
        ("object_type=gpuflavor", ["p1"]),
        ("since=2026-11-01T12:10:00Z&until=2026-11-01T12:20:00Z", ["g1", "a2"]),
        # The browser's date-time picker sends no zone: the page reads it as UTC.
        ("since=2026-11-01T12:15", ["p1", "a3", "g1"]),
    ],
)
def test_the_filters_narrow_the_log(root: Any, log: Any, query: str, expected: list[str]) -> None:
    assert shown(client_for(root).get(f"/audit/?{query}")) == ids(log, *expected)


def test_a_tenant_admin_sees_only_their_tenant(alice: Any, log: Any) -> None:
    client = client_for(alice)
    page = client.get("/t/acme/audit/")
    assert shown(page) == ids(log, "a3", "a2", "a1")
    assert 'name="tenant"' not in page.content.decode()  # the page is about acme already
    # Naming another tenant changes nothing: the tenant comes from the URL.
    assert shown(client.get("/t/acme/audit/?tenant=globex")) == ids(log, "a3", "a2", "a1")
    assert shown(client.get("/t/acme/audit/?actor=bob&action=cluster.delete")) == ids(log, "a3")
    assert client.get("/t/globex/audit/").status_code == 404
    assert client.get("/audit/").status_code == 404


@pytest.mark.parametrize("who", ["bob", "vera", "charlie"])
def test_members_who_are_not_admins_get_a_404(who: str, log: Any, request: Any) -> None:
    client = client_for(request.getfixturevalue(who))
    assert client.get("/t/acme/audit/").status_code == 404
    assert client.get("/audit/").status_code == 404


def test_a_platform_admin_reads_a_tenants_log_too(root: Any, log: Any) -> None:
    assert shown(client_for(root).get("/t/globex/audit/")) == ids(log, "g1")


def test_a_bad_time_is_reported_not_ignored_silently(root: Any, log: Any) -> None:
    response = client_for(root).get("/audit/?since=yesterday")
    assert 'role="alert"' in response.content.decode()


def test_the_log_is_paged_at_a_constant_query_count(
    root: Any, alice: Any, acme: Any, log: Any
) -> None:
    def count(client: Client, url: str) -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert client.get(url).status_code == 200
        return len(ctx.captured_queries)

    pages = [(client_for(root), "/audit/"), (client_for(alice), "/t/acme/audit/")]
    before = [count(client, url) for client, url in pages]
    for n in range(60):
        event(
            actor="bob",
            tenant=acme,
            action="cluster.create",
            kind="cluster",
            pk=str(n),
            minutes=40 + n,
        )
    assert [count(client, url) for client, url in pages] == before
    first = client_for(alice).get("/t/acme/audit/")
    assert len(shown(first)) == 50 and "Page 1 of 2" in first.content.decode()
    second = shown(client_for(alice).get("/t/acme/audit/?page=2"))
    assert len(second) == 13  # 63 events of acme
    assert second[-3:] == ids(log, "a3", "a2", "a1")  # the oldest last


def test_the_api_filters_actions_by_their_start_too(root: Any, log: Any, as_user: Any) -> None:
    """The API and the pages share the FilterSet: the same start, the same events."""
    response = as_user(root).get("/api/v1/audit/", {"action": "cluster"})
    assert response.status_code == 200
    assert sorted(row["id"] for row in response.json()["results"]) == sorted(
        ids(log, "a3", "g1", "a2")
    )


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_a_tenant_admin_finds_every_membership_change_by_its_kind(
    page: Any, live_server: Any, browser_env: None, alice: Any, bob: Any
) -> None:
    """Typed into the page's Action field: "membership" finds membership.add and
    membership.remove, not the cluster's events."""
    from playwright.sync_api import expect

    from tenants.services import membership_add, membership_remove
    from tests.frontend.test_browser import sign_in

    acme = alice.memberships.get().tenant
    membership_remove(actor=alice, membership=bob.memberships.get())
    membership_add(actor=alice, tenant=acme, username="bob", role="engineer")
    base = live_server.url
    sign_in(page, base, "alice")
    page.get_by_role("link", name="Acme Research").click()
    page.get_by_role("navigation", name="Acme Research").get_by_role("link", name="Audit").click()
    page.get_by_label("Action").fill("membership")
    page.get_by_role("button", name="Filter").click()
    actions = page.locator("[data-audit-events] tbody td code").filter(has_text=".")
    expect(actions.first).to_be_visible()
    shown = {text for text in actions.all_inner_texts() if "." in text}
    assert shown >= {"membership.add", "membership.remove"}, shown
    assert all(text.startswith("membership.") for text in shown), shown
