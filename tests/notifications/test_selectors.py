"""notifications.selectors: a user's preferences with defaults, whose deliveries and
webhooks each reader sees, and which kept mails a user may read."""

from __future__ import annotations

from email.message import EmailMessage
from pathlib import Path
from typing import Any

from notifications import selectors, services
from notifications.event_kinds import EventKind
from notifications.models import DEFAULT_EMAIL

KIND = EventKind.values[0]


def test_preferences_fill_in_defaults_and_never_show_the_secret(bob: Any) -> None:
    services.preferences_set(
        user=bob,
        lines=[services.PreferenceLine(kind=KIND, email=not DEFAULT_EMAIL, webhook=True)],
        webhook_url="https://hooks.example.com/bob",
    )
    read = selectors.preferences_of(user=bob)
    lines = {line["kind"]: line for line in read["preferences"]}
    assert set(lines) == set(EventKind.values)
    assert lines[KIND]["email"] is (not DEFAULT_EMAIL)
    assert all(line["email"] is DEFAULT_EMAIL for kind, line in lines.items() if kind != KIND)
    assert read["webhook_url"] == "https://hooks.example.com/bob" and "secret" not in str(read)


def test_a_tenants_webhooks_and_deliveries_are_its_own(
    alice: Any, charlie: Any, acme: Any, globex: Any, root: Any
) -> None:
    hook, _ = services.tenant_webhook_create(
        actor=alice, tenant=acme, url="https://hooks.example.com/", kinds=[KIND]
    )
    delivery = services.tenant_webhook_test(actor=alice, webhook=hook)
    assert list(selectors.tenant_webhooks(tenant=acme)) == [hook]
    assert list(selectors.tenant_webhooks(tenant=globex)) == []
    assert list(selectors.tenant_deliveries(tenant=acme)) == [delivery]
    assert list(selectors.tenant_deliveries(tenant=globex)) == []
    assert list(selectors.deliveries_of_user(user=alice)) == []  # a tenant's, not hers


def _mail(directory: Path, name: str, to: str) -> None:
    message = EmailMessage()
    message["To"], message["Subject"] = to, f"for {to}"
    message["X-Envelope-To"] = to
    message.set_content("hello")
    (directory / name).write_bytes(message.as_bytes())


def test_kept_mails_are_each_readers_own_and_all_of_them_for_a_platform_admin(
    bob: Any, root: Any, tmp_path: Path, settings: Any
) -> None:
    settings.MAIL_SINK_DIR = ""
    assert selectors.sink_mails(user=root) == []
    settings.MAIL_SINK_DIR = str(tmp_path)
    bob.email = "bob@example.com"
    bob.save()
    _mail(tmp_path, "20260101T000000.000000Z-aaaaaaaaaaaa.eml", "bob@example.com")
    _mail(tmp_path, "20260101T000001.000000Z-bbbbbbbbbbbb.eml", "eve@example.com")
    assert len(selectors.sink_mails(user=root)) == 2
    bobs = selectors.sink_mails(user=bob)
    assert len(bobs) == 1
    assert selectors.sink_mail(user=bob, name="20260101T000001.000000Z-bbbbbbbbbbbb.eml") is None
