"""Money caps' soft notices and the monthly cost report mail, end to end through the
delivery task and Django's email backend (docs/cost.md).

The clock is fixed at 2026-11-20 12:00 UTC (the month began Nov 1).
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
from django.core import mail

from clusters.models import CostCap, CostReportMail, FlavorPrice
from notifications import tasks
from notifications.event_kinds import EventKind
from notifications.models import Delivery, DeliveryStatus, NotificationPreference
from tests.factories import usage_span

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _fixed_clock(monkeypatch: Any) -> None:
    monkeypatch.setattr("django.utils.timezone.now", lambda: NOW)


@pytest.fixture
def priced(h100: Any) -> None:
    FlavorPrice.objects.create(
        flavor_name="h100",
        price_per_gpu_hour=Decimal(10),
        effective_from=datetime(2026, 1, 1, tzinfo=UTC),
    )


def use(tenant: Any, owner: Any, flavor: Any, gpus: int, day: int = 2) -> Any:
    start = datetime(2026, 11, day, 10, tzinfo=UTC)
    return usage_span(
        tenant=tenant,
        owner=owner,
        flavor=flavor,
        gpus=gpus,
        start=start,
        end=start.replace(hour=11),
    )


def test_a_soft_cap_is_told_to_the_admins_and_the_engineer_once_a_month(
    acme: Any,
    alice: Any,
    bob: Any,
    vera: Any,
    h100: Any,
    priced: None,
    fast_notify: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    cap = CostCap.objects.create(tenant=acme, username="bob", soft_limit=50, hard_limit=200)
    use(acme, bob, h100, 4)  # 40 USD: under
    with django_capture_on_commit_callbacks(execute=True):
        assert tasks.check_cost_caps.apply().get() == 0
    use(acme, bob, h100, 1, day=3)  # 50 USD: at the soft limit
    with django_capture_on_commit_callbacks(execute=True):
        assert tasks.check_cost_caps.apply().get() == 2  # alice (admin) and bob, by email
    assert sorted(m.to[0] for m in mail.outbox) == [alice.email, bob.email]
    message = mail.outbox[0]
    assert message.subject == "[gangway] bob: cost cap reached"
    assert (
        "Cost cap reached: engineer bob in acme has spent 50.00 USD of the soft monthly cost "
        "cap of 50.00 USD in November 2026 (UTC)." in message.body
    )
    assert vera.email not in [m.to[0] for m in mail.outbox]  # a viewer is not told
    rows = Delivery.objects.filter(kind=EventKind.COST_CAP)
    assert {row.status for row in rows} == {DeliveryStatus.SENT}
    cap.refresh_from_db()
    assert cap.notified_month.isoformat() == "2026-11-01"
    use(acme, bob, h100, 5, day=4)
    with django_capture_on_commit_callbacks(execute=True):
        assert tasks.check_cost_caps.apply().get() == 0  # once per month
    assert len(mail.outbox) == 2


def test_a_user_who_turned_cost_cap_mail_off_is_not_mailed(
    acme: Any, alice: Any, bob: Any, h100: Any, priced: None, fast_notify: Any
) -> None:
    NotificationPreference.objects.create(user=alice, kind=EventKind.COST_CAP, email=False)
    CostCap.objects.create(tenant=acme, soft_limit=10)
    use(acme, bob, h100, 1)
    assert tasks.check_cost_caps.apply().get() == 0  # the tenant's cap: admins only
    assert CostCap.objects.get().notified_month is not None


def test_the_monthly_report_is_mailed_to_the_admins_once_with_its_csv(
    acme: Any, alice: Any, bob: Any, h100: Any, priced: None, fast_notify: Any, monkeypatch: Any
) -> None:
    october = datetime(2026, 10, 5, 10, tzinfo=UTC)
    cluster = usage_span(
        tenant=acme, owner=bob, flavor=h100, gpus=3, start=october, end=october.replace(hour=12)
    )
    september = datetime(2026, 9, 30, 10, tzinfo=UTC)  # not in October's report
    usage_span(
        tenant=acme, owner=bob, flavor=h100, gpus=1, start=september, end=september.replace(hour=11)
    )
    first_of_november = datetime(2026, 11, 1, 0, 15, tzinfo=UTC)
    monkeypatch.setattr("django.utils.timezone.now", lambda: first_of_november)
    assert tasks.mail_cost_reports.apply().get() == {"acme": 1}
    (message,) = mail.outbox
    assert message.to == [alice.email]
    assert message.subject == "[gangway] acme cost report for October 2026"
    assert "Total: 60.00 USD on 6.000 GPU-hours." in message.body
    html, mime = message.alternatives[0]
    assert mime == "text/html" and "60.00 USD" in html and cluster.name in html
    name, csv_text, csv_mime = message.attachments[0]
    assert (name, csv_mime) == ("gangway-cost-acme-2026-10.csv", "text/csv")
    assert f"request,{cluster.name},cluster,bob,h100,6.000,60.00,USD" in csv_text
    assert CostReportMail.objects.get(tenant=acme).month.isoformat() == "2026-10-01"
    assert tasks.mail_cost_reports.apply().get() == {}
    assert len(mail.outbox) == 1  # each month once
