"""The Notifications page (every user) and a tenant's Webhooks page (its admins)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from notifications.models import NotificationPreference, TenantWebhook
from tenants.models import AuditEvent

pytestmark = pytest.mark.django_db


def _browser(user: Any) -> Client:
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    return client


def _csrf(client: Client, url: str) -> str:
    client.get(url)
    return client.cookies["csrftoken"].value


def test_the_notifications_page_saves_choices(bob: Any) -> None:
    client = _browser(bob)
    page = client.get("/notifications/")
    assert page.status_code == 200
    assert b"Cluster ready" in page.content and b"Sent to you" in page.content
    assert b'href="/notifications/"' in page.content  # in the navigation
    token = _csrf(client, "/notifications/")
    assert client.post("/notifications/", {"failed-email": "on"}).status_code == 403  # no CSRF
    saved = client.post(
        "/notifications/",
        {"csrfmiddlewaretoken": token, "failed-email": "on", "webhook_url": ""},
    )
    assert saved.status_code == 302
    prefs = {p.kind: (p.email, p.webhook) for p in NotificationPreference.objects.filter(user=bob)}
    assert prefs["failed"] == (True, False) and prefs["cluster_ready"] == (False, False)
    with_url = client.post(
        "/notifications/",
        {"csrfmiddlewaretoken": token, "webhook_url": "https://me.example.com/h"},
    )
    assert with_url.status_code == 200 and b"whsec_" in with_url.content
    assert b"whsec_" not in client.get("/notifications/").content
    bad = client.post("/notifications/", {"csrfmiddlewaretoken": token, "webhook_url": "ftp://x"})
    assert bad.status_code == 400
    # htmx polls the log: the rows only.
    rows = client.get("/notifications/", HTTP_HX_REQUEST="true")
    assert rows.status_code == 200 and rows.content.startswith(b'<div id="delivery-rows"')


def test_the_webhooks_page_for_admins(alice: Any, bob: Any, charlie: Any) -> None:
    client = _browser(alice)
    page = client.get("/t/acme/webhooks/")
    assert page.status_code == 200 and b"Add a webhook" in page.content
    assert b'href="/t/acme/webhooks/"' in client.get("/t/acme/").content
    token = _csrf(client, "/t/acme/webhooks/")
    made = client.post(
        "/t/acme/webhooks/",
        {"csrfmiddlewaretoken": token, "url": "https://hooks.example.com/a", "kinds": ["failed"]},
    )
    assert made.status_code == 201
    hook = TenantWebhook.objects.get()
    assert hook.secret.encode() in made.content
    again = client.get("/t/acme/webhooks/")
    assert hook.secret.encode() not in again.content and b"hooks.example.com" in again.content
    tested = client.post(f"/t/acme/webhooks/{hook.pk}/test/", {"csrfmiddlewaretoken": token})
    assert tested.status_code == 302
    assert b"Test" in client.get("/t/acme/webhooks/").content
    gone = client.post(f"/t/acme/webhooks/{hook.pk}/delete/", {"csrfmiddlewaretoken": token})
    assert gone.status_code == 302 and not TenantWebhook.objects.exists()
    assert AuditEvent.objects.filter(action__startswith="webhook.").count() == 2
    # engineers do not see it, other tenants get a 404
    assert _browser(bob).get("/t/acme/webhooks/").status_code == 403
    assert b'href="/t/acme/webhooks/"' not in _browser(bob).get("/t/acme/").content
    assert _browser(charlie).get("/t/acme/webhooks/").status_code == 404
