"""The usage pages: GPU-hours per UTC day over 7, 30 or 90 days, drawn as inline SVG
and exported as CSV, for one tenant and (platform admins) for all of them.

The clock is fixed at 2026-11-20 12:00 UTC so that every number is exact: a span
crossing midnight counts on both days, an open span runs to now, a span that began
before the window counts only inside it.
"""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from clusters.rows import usage
from tests.factories import usage_span

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


def at(day: int, hour: int, month: int = 11) -> datetime:
    return datetime(2026, month, day, hour, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _fixed_clock(monkeypatch: Any) -> None:
    monkeypatch.setattr("django.utils.timezone.now", lambda: NOW)


@pytest.fixture
def ledger(acme: Any, globex: Any, alice: Any, bob: Any, charlie: Any, h100: Any, l4: Any) -> None:
    # bob, 2 GPUs, 22:00 -> 02:00 across midnight, idle 23:00 -> 01:00.
    usage_span(
        tenant=acme,
        owner=bob,
        flavor=h100,
        gpus=2,
        start=at(18, 22),
        end=at(19, 2),
        idle=(at(18, 23), at(19, 1)),
    )
    # alice, 1 L4 GPU since 09:00 today, still held: 3 h to noon.
    usage_span(tenant=acme, owner=alice, flavor=l4, gpus=1, start=at(20, 9), end=None)
    # bob, 1 GPU for days, ending one hour into the 7-day window (which opens Nov 14).
    usage_span(tenant=acme, owner=bob, flavor=h100, gpus=1, start=at(10, 22), end=at(14, 1))
    # Inside 90 days only (that window opens Aug 23).
    usage_span(tenant=acme, owner=bob, flavor=h100, gpus=1, start=at(1, 0, 9), end=at(1, 2, 9))
    # Another tenant's: on the platform's report, never on acme's.
    usage_span(tenant=globex, owner=charlie, flavor=h100, gpus=1, start=at(20, 10), end=at(20, 11))


def client_for(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def csv_rows(response: Any) -> list[list[str]]:
    return list(csv.reader(io.StringIO(response.content.decode())))


HEADER = [
    "day",
    "tenant",
    "user",
    "flavor",
    "gpu_hours",
    "active_hours",
    "idle_hours",
    "cost",
    "currency",
]
# No flavor is priced here: every line costs nothing (tests/clusters/rows/test_costs.py
# prices them).
FREE = ["0.00", "USD"]


def test_days_are_cut_at_midnight_and_open_spans_run_to_now(bob: Any, ledger: None) -> None:
    response = client_for(bob).get("/t/acme/usage/?days=7&format=csv")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    assert response["Content-Disposition"] == (
        'attachment; filename="gangway-usage-acme-7d-2026-11-20.csv"'
    )
    assert csv_rows(response) == [
        HEADER,
        ["2026-11-14", "acme", "bob", "h100", "1.000", "1.000", "0.000", *FREE],
        ["2026-11-18", "acme", "bob", "h100", "4.000", "2.000", "2.000", *FREE],
        ["2026-11-19", "acme", "bob", "h100", "4.000", "2.000", "2.000", *FREE],
        ["2026-11-20", "acme", "alice", "l4", "3.000", "3.000", "0.000", *FREE],
    ]


@pytest.mark.parametrize(
    ("days", "total", "first_day"),
    [("7", 12, "2026-11-14"), ("30", 86, "2026-11-10"), ("90", 88, "2026-09-01")],
)
def test_the_window_switch_chooses_7_30_or_90_days(
    bob: Any, ledger: None, days: str, total: int, first_day: str
) -> None:
    client = client_for(bob)
    rows = csv_rows(client.get(f"/t/acme/usage/?days={days}&format=csv"))[1:]
    assert sum(float(row[4]) for row in rows) == pytest.approx(total)
    assert rows[0][0] == first_day
    page = client.get(f"/t/acme/usage/?days={days}").content.decode()
    assert f'<a href="?days={days}" aria-current="page">Last {days} days</a>' in page
    assert f"{total}.0 GPU-hours" in page


def test_thirty_days_counts_the_long_span_per_day(bob: Any, ledger: None) -> None:
    rows = csv_rows(client_for(bob).get("/t/acme/usage/?days=30&format=csv"))[1:]
    long_span = [(r[0], r[4]) for r in rows if r[0] < "2026-11-15"]
    assert long_span == [
        ("2026-11-10", "2.000"),
        ("2026-11-11", "24.000"),
        ("2026-11-12", "24.000"),
        ("2026-11-13", "24.000"),
        ("2026-11-14", "1.000"),
    ]


def test_an_unknown_window_falls_back_to_30_days(bob: Any, ledger: None) -> None:
    response = client_for(bob).get("/t/acme/usage/?days=365&format=csv")
    assert "-30d-" in response["Content-Disposition"]
    assert usage.parse_window("x") == usage.parse_window(None) == 30


def test_the_tenant_page_draws_charts_by_user_flavor_and_activity(bob: Any, ledger: None) -> None:
    page = client_for(bob).get("/t/acme/usage/?days=7").content.decode()
    assert page.count('<svg class="chart-svg"') == 3
    assert "GPU-hours per day by user" in page and "GPU-hours per day by flavor" in page
    assert "Active and idle GPU-hours per day" in page
    # A bar per day and series, titled for a reader hovering it.
    assert "<title>Nov 18: bob 4 GPU-h</title>" in page
    assert "<title>Nov 19: idle 2 GPU-h</title>" in page
    assert "<title>Nov 20: alice 3 GPU-h</title>" in page
    assert "charlie" not in page  # another tenant's use
    assert 'href="?days=7&amp;format=csv"' in page
    assert " style=" not in page  # the CSP refuses inline styles


def test_the_active_and_idle_split_is_on_the_page(bob: Any, ledger: None) -> None:
    page = client_for(bob).get("/t/acme/usage/?days=7").content.decode()
    assert "<strong>8.0</strong> active" in page
    assert "<strong data-idle-hours>4.0</strong> idle" in page


def test_the_platform_page_shows_every_tenant_by_tenant_and_flavor(root: Any, ledger: None) -> None:
    client = client_for(root)
    page = client.get("/usage/?days=7").content.decode()
    assert '<tr data-tenant="acme"><td><a href="/t/acme/usage/?days=7">acme</a></td>' in page
    assert '<td class="num">12.000</td>' in page
    assert '<tr data-tenant="globex">' in page
    assert '<tr data-flavor="h100"><td>h100</td><td class="num">10.000</td>' in page
    assert "<strong data-total-hours>13.000 GPU-hours</strong>" in page
    assert page.count('<svg class="chart-svg"') == 3
    response = client.get("/usage/?days=7&format=csv")
    assert 'filename="gangway-usage-all-7d-2026-11-20.csv"' in response["Content-Disposition"]
    rows = csv_rows(response)
    assert rows[0] == HEADER
    assert ["2026-11-20", "globex", "charlie", "h100", "1.000", "1.000", "0.000", *FREE] in rows
    assert len(rows) == 1 + 5


@pytest.mark.parametrize("who", ["alice", "bob", "charlie"])
def test_the_platform_page_is_a_404_for_anyone_but_platform_admins(
    who: str, ledger: None, request: Any
) -> None:
    client = client_for(request.getfixturevalue(who))
    assert client.get("/usage/").status_code == 404
    assert client.get("/usage/?format=csv").status_code == 404


def test_another_tenants_usage_is_a_404(charlie: Any, ledger: None) -> None:
    assert client_for(charlie).get("/t/acme/usage/?format=csv").status_code == 404


def test_the_api_takes_days_and_returns_the_days(bob: Any, ledger: None, as_user: Any) -> None:
    body = as_user(bob).get("/api/v1/tenants/acme/usage/?days=7").json()
    assert body["since"] == "2026-11-14T00:00:00Z"
    assert body["total_gpu_hours"] == 12.0
    assert body["daily"][1] == {
        "day": "2026-11-18",
        "user": "bob",
        "flavor": "h100",
        "gpu_hours": 4.0,
        "active_hours": 2.0,
        "idle_hours": 2.0,
        "cost": 0.0,
    }
    both = as_user(bob).get("/api/v1/tenants/acme/usage/?days=7&since=2026-11-01T00:00:00Z")
    assert both.status_code == 400
    assert as_user(bob).get("/api/v1/tenants/acme/usage/?days=8").status_code == 400


def test_query_counts_do_not_grow_with_spans(
    root: Any, bob: Any, acme: Any, h100: Any, ledger: None
) -> None:
    def count(client: Client, url: str) -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert client.get(url).status_code == 200
        return len(ctx.captured_queries)

    pages = [(client_for(bob), "/t/acme/usage/?days=30"), (client_for(root), "/usage/?days=30")]
    pages += [(client, url + "&format=csv") for client, url in pages]
    before = [count(client, url) for client, url in pages]
    for n in range(6):
        usage_span(
            tenant=acme,
            owner=bob,
            flavor=h100,
            gpus=1,
            start=at(15 + n % 3, 20),
            end=None if n % 2 else at(16 + n % 3, 3),
            idle=(at(15 + n % 3, 21), at(15 + n % 3, 23)),
        )
    assert [count(client, url) for client, url in pages] == before
