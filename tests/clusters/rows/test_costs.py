"""Showback (docs/cost.md): usage priced at the flavor price in force over each piece of
it, and the hard monthly cost caps that refuse new requests with the true reason,
through the service, the API, the dry-run and the form, writing nothing.

The clock is fixed at 2026-11-20 12:00 UTC; the month began Nov 1.
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
from django.test import Client

from clusters.models import ClusterEvent, ClusterRequest, CostCap, FlavorPrice
from clusters.requests import services
from clusters.rows import costs
from clusters.rows.cost_caps import check_hard_caps
from clusters.rows.spec import ClusterSpec
from controlplane.exceptions import ServiceConflict
from tenants.models import AuditEvent, Quota
from tests.factories import usage_span

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _fixed_clock(monkeypatch: Any) -> None:
    monkeypatch.setattr("django.utils.timezone.now", lambda: NOW)


def price(flavor: str, amount: str, at: datetime) -> None:
    FlavorPrice.objects.create(
        flavor_name=flavor, price_per_gpu_hour=Decimal(amount), effective_from=at
    )


def use(tenant: Any, owner: Any, flavor: Any, gpus: int, hours: int = 1) -> Any:
    """``gpus`` GPUs for ``hours`` hours from Nov 2 10:00."""
    start = datetime(2026, 11, 2, 10, tzinfo=UTC)
    return usage_span(
        tenant=tenant,
        owner=owner,
        flavor=flavor,
        gpus=gpus,
        start=start,
        end=start.replace(hour=10 + hours),
    )


def test_a_span_is_priced_at_each_price_in_force_and_cut_at_midnight(
    acme: Any, bob: Any, h100: Any
) -> None:
    price("h100", "2", datetime(2026, 1, 1, tzinfo=UTC))
    price("h100", "3", datetime(2026, 11, 1, 22, tzinfo=UTC))
    price("h100", "100", datetime(2026, 12, 1, tzinfo=UTC))  # not yet in force
    # 4 GPUs from Nov 1 20:00 to Nov 2 02:00: 2 h at 2, then 2 h at 3 on Nov 1, 2 h at 3 on Nov 2.
    cluster = usage_span(
        tenant=acme,
        owner=bob,
        flavor=h100,
        gpus=4,
        start=datetime(2026, 11, 1, 20, tzinfo=UTC),
        end=datetime(2026, 11, 2, 2, tzinfo=UTC),
    )
    rows = costs.cost_rows(tenant=acme, since=datetime(2026, 11, 1, tzinfo=UTC), until=NOW)
    assert [(r.day.day, r.request, r.gpu_hours, r.cost) for r in rows] == [
        (1, cluster.name, Decimal(16), Decimal(16 + 24)),
        (2, cluster.name, Decimal(8), Decimal(24)),
    ]
    assert costs.month_spend(tenant=acme) == Decimal("64.00")
    assert costs.month_spend(tenant=acme, username="nobody") == Decimal("0.00")


def test_a_flavor_without_a_price_costs_nothing_and_says_so(acme: Any, bob: Any, l4: Any) -> None:
    use(acme, bob, l4, 2, hours=3)
    (row,) = costs.cost_rows(tenant=acme, since=datetime(2026, 11, 1, tzinfo=UTC), until=NOW)
    assert (row.gpu_hours, row.cost, row.unpriced_hours) == (6, 0, 6)


def _spec(h100: Any, name: str) -> ClusterSpec:
    return ClusterSpec(flavor=h100, kind="dev", workers=1, name=name)


REFUSAL = (
    "Refused: tenant acme has spent 100.00 USD of the hard monthly cost cap of 100.00 USD "
    "in November 2026 (UTC). New requests are refused until the month turns or a tenant "
    "admin raises the cap."
)


def test_the_tenants_hard_cap_refuses_new_requests_with_the_true_reason(
    acme: Any, bob: Any, h100: Any
) -> None:
    price("h100", "10", datetime(2026, 1, 1, tzinfo=UTC))
    CostCap.objects.create(tenant=acme, hard_limit=Decimal(100))
    use(acme, bob, h100, 9)  # 90 USD: under the cap
    services.cluster_request_create(actor=bob, tenant=acme, spec=_spec(h100, "under"))
    use(acme, bob, h100, 1)  # 100 USD: at the cap
    rows, events = ClusterRequest.objects.count(), ClusterEvent.objects.count()
    with pytest.raises(ServiceConflict) as refused:
        services.cluster_request_create(actor=bob, tenant=acme, spec=_spec(h100, "over"))
    assert (refused.value.code, refused.value.message) == ("cost_cap", REFUSAL)
    assert (ClusterRequest.objects.count(), ClusterEvent.objects.count()) == (rows, events)


def test_an_engineers_hard_cap_refuses_only_that_engineer(
    acme: Any, alice: Any, bob: Any, h100: Any
) -> None:
    price("h100", "1.5", datetime(2026, 1, 1, tzinfo=UTC))
    CostCap.objects.create(tenant=acme, username="bob", soft_limit=1, hard_limit=Decimal(3))
    use(acme, bob, h100, 2)  # 3.00
    with pytest.raises(ServiceConflict) as refused:
        check_hard_caps(tenant=acme, owner=bob)
    assert "engineer bob in acme has spent 3.00 USD of the hard monthly cost cap of 3.00" in (
        refused.value.message
    )
    check_hard_caps(tenant=acme, owner=alice)  # alice is not capped


def test_the_api_dry_run_and_form_refuse_alike_and_write_nothing(
    acme: Any, bob: Any, h100: Any, as_user: Any
) -> None:
    price("h100", "10", datetime(2026, 1, 1, tzinfo=UTC))
    CostCap.objects.create(tenant=acme, soft_limit=50, hard_limit=Decimal(100))
    use(acme, bob, h100, 10)
    rows, audits = ClusterRequest.objects.count(), AuditEvent.objects.count()
    api = as_user(bob)
    created = api.post("/api/v1/tenants/acme/clusters/", {"flavor": "h100"}, format="json")
    assert created.status_code == 409
    assert created.json()["error"]["code"] == "cost_cap"
    assert created.json()["error"]["message"] == REFUSAL
    verdict = api.post("/api/v1/tenants/acme/clusters/dry-run/", {"flavor": "h100"}, format="json")
    assert verdict.status_code in (200, 409)
    assert "hard monthly cost cap" in verdict.content.decode()
    client = Client()
    client.force_login(bob)
    page = client.post("/t/acme/clusters/new/", {"kind": "dev", "flavor": "h100", "workers": 1})
    assert page.status_code in (400, 409)
    assert "hard monthly cost cap of 100.00 USD in November 2026" in page.content.decode()
    assert (ClusterRequest.objects.count(), AuditEvent.objects.count()) == (rows, audits)


def test_the_usage_page_api_and_csv_show_costs(
    acme: Any, bob: Any, h100: Any, as_user: Any
) -> None:
    price("h100", "2.5", datetime(2026, 1, 1, tzinfo=UTC))
    cluster = use(acme, bob, h100, 4)  # 4 GPU-hours: 10.00
    body = as_user(bob).get("/api/v1/tenants/acme/usage/?days=30").json()
    assert (body["currency"], body["total_cost"]) == ("USD", 10.0)
    assert body["by_user"][0]["cost"] == 10.0
    assert body["daily"][0]["cost"] == 10.0
    (line,) = body["by_request"]
    assert (line["request"], line["workload"], line["cost"]) == (cluster.name, "cluster", 10.0)
    assert line["daily"] == [{"day": "2026-11-02", "gpu_hours": 4.0, "cost": 10.0}]
    client = Client()
    client.force_login(bob)
    page = client.get("/t/acme/usage/?days=30").content.decode()
    assert "10.00 USD" in page and f'data-request="{cluster.name}"' in page
    csv_lines = client.get("/t/acme/usage/?days=30&format=csv").content.decode().splitlines()
    assert csv_lines[0].endswith("idle_hours,cost,currency")
    assert csv_lines[1] == "2026-11-02,acme,bob,h100,4.000,4.000,0.000,10.00,USD"
    per_request = client.get("/t/acme/usage/?days=30&format=csv&by=request").content.decode()
    assert f"2026-11-02,acme,{cluster.name},cluster,bob,h100,4.000,10.00,USD" in per_request


def test_gpu_hours_beyond_the_quota_are_priced_at_the_borrowed_price(
    acme: Any, bob: Any, alice: Any, h100: Any
) -> None:
    # acme's nominal h100 quota: 8 GPUs. Price 2, borrowed 5 (from Nov 1).
    Quota.objects.filter(tenant=acme, flavor=h100).update(gpus=8)
    FlavorPrice.objects.create(
        flavor_name="h100",
        price_per_gpu_hour=Decimal(2),
        borrowed_price_per_gpu_hour=Decimal(5),
        effective_from=datetime(2026, 11, 1, tzinfo=UTC),
    )
    start = datetime(2026, 11, 2, 10, tzinfo=UTC)
    # bob holds 8 GPUs from 10:00 to 14:00 (within the quota alone); alice 4 more from
    # 12:00 to 14:00: over those two hours the tenant holds 12, a third of it borrowed.
    bobs = usage_span(
        tenant=acme, owner=bob, flavor=h100, gpus=8, start=start, end=start.replace(hour=14)
    )
    alices = usage_span(
        tenant=acme,
        owner=alice,
        flavor=h100,
        gpus=4,
        start=start.replace(hour=12),
        end=start.replace(hour=14),
    )
    rows = {
        r.request: r
        for r in costs.cost_rows(tenant=acme, since=datetime(2026, 11, 1, tzinfo=UTC), until=NOW)
    }
    third = Decimal(1) / 3
    # bob: 16 GPU-hours at 2 alone, then 16 of which a third borrowed.
    assert rows[bobs.name].gpu_hours == 32
    assert costs.money(rows[bobs.name].cost) == costs.money(
        16 * Decimal(2) + 16 * ((1 - third) * 2 + third * 5)
    )
    # alice: 8 GPU-hours, a third of them borrowed; the tenant pays 12 x 2 x 2 h plus the
    # 4 borrowed GPUs' 2 h at 5 over that stretch.
    assert costs.money(rows[alices.name].cost) == costs.money(8 * ((1 - third) * 2 + third * 5))
    total = costs.month_spend(tenant=acme)
    assert total == costs.money(Decimal(16 * 2 + 8 * 2 * 2 + 4 * 2 * 5))
    # An engineer's spend counts what the others held: bob's own share is borrowed too.
    assert costs.month_spend(tenant=acme, username="bob") == costs.money(rows[bobs.name].cost)


def test_without_a_borrowed_price_borrowing_costs_the_price(acme: Any, bob: Any, h100: Any) -> None:
    Quota.objects.filter(tenant=acme, flavor=h100).update(gpus=2)
    price("h100", "2", datetime(2026, 11, 1, tzinfo=UTC))
    use(acme, bob, h100, gpus=4, hours=3)  # 2 of 4 borrowed, at the same price
    assert costs.month_spend(tenant=acme) == Decimal("24.00")
