"""The series of docs/metrics.md in one process (no PROMETHEUS_MULTIPROC_DIR): each moves
with the event that drives it. tests/test_prometheus.py checks them across processes."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from clusters.domain.states import State
from clusters.models import IdleSpan
from clusters.rows.transitions import transition, transition_many
from controlplane import metrics

TOKEN = "a-metrics-token-of-some-length-0123456789"


def _value(name: str, **labels: str) -> float:
    return metrics.REGISTRY.get_sample_value(name, labels) or 0.0


def _scrape(client: Any) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(response.content.decode())
        for s in family.samples
    }


@pytest.mark.django_db
def test_database_gauges_say_queue_depth_and_gpus_guaranteed_held_borrowed(
    client: Any, settings: Any, make_cluster: Any, l4: Any
) -> None:
    settings.METRICS_TOKEN = TOKEN
    make_cluster(name="waits", state=State.QUEUED, queue_reason="quota").save()
    make_cluster(name="fresh", state=State.QUEUED).save()
    # acme's l4 quota is 2: three held is one borrowed.
    big = make_cluster(
        name="big", flavor=l4, workers=3, gpus=Decimal(3), state=State.READY, holds_gpus=True
    )
    big.save()
    # Only an open idle span counts as idle now.
    idle = {"tenant": big.tenant, "cluster": big, "username": "alice", "flavor_name": "l4"}
    IdleSpan.objects.create(**idle, gpus=Decimal(3), started_at=timezone.now())
    IdleSpan.objects.create(
        **idle, gpus=Decimal(1), started_at=timezone.now(), ended_at=timezone.now()
    )
    seen = _scrape(client)
    key = (("flavor", "h100"), ("reason", "quota"), ("tenant", "acme"))
    assert seen[("gangway_queue_depth", key)] == 1
    pending = (("flavor", "h100"), ("reason", "pending"), ("tenant", "acme"))
    assert seen[("gangway_queue_depth", pending)] == 1
    l4_acme = (("flavor", "l4"), ("tenant", "acme"))
    assert seen[("gangway_gpus_held", l4_acme)] == 3
    assert seen[("gangway_gpus_guaranteed", l4_acme)] == 2
    assert seen[("gangway_gpus_borrowed", l4_acme)] == 1
    assert seen[("gangway_gpus_borrowed", (("flavor", "h100"), ("tenant", "acme")))] == 0
    assert seen[("gangway_gpus_idle", l4_acme)] == 3


@pytest.mark.django_db(transaction=True)
def test_admission_readiness_and_preemption_are_counted_once_committed(
    make_cluster: Any,
) -> None:
    admitted = _value("gangway_admitted_total", tenant="acme", flavor="h100")
    waits = _value("gangway_wait_seconds_count", flavor="h100")
    ready = _value("gangway_time_to_ready_seconds_count", workload="cluster", flavor="h100")
    preempted = _value("gangway_preempted_total", tenant="acme", flavor="h100", reason="reclaimed")
    rows = [make_cluster(name=f"row-{i}", state=State.QUEUED) for i in range(3)]
    for row in rows:
        row.save()
    assert transition(rows[0], State.ADMITTED, reason="admitted")
    assert len(transition_many(rows[1:], State.ADMITTED, reason="admitted")) == 2
    assert _value("gangway_admitted_total", tenant="acme", flavor="h100") == admitted + 3
    assert _value("gangway_wait_seconds_count", flavor="h100") == waits + 3
    for row in rows:
        assert transition(row, State.PROVISIONING, reason="provisioning")
    assert transition(rows[0], State.READY, reason="ready")
    ready_now = "gangway_time_to_ready_seconds_count"
    assert _value(ready_now, workload="cluster", flavor="h100") == ready + 1
    assert transition(rows[0], State.SUSPENDED, reason="reclaimed")
    assert (
        _value("gangway_preempted_total", tenant="acme", flavor="h100", reason="reclaimed")
        == preempted + 1
    )
    # Admission again after a resume counts again; readiness, only the first time.
    assert transition(rows[0], State.QUEUED, reason="resumed")
    assert transition(rows[0], State.ADMITTED, reason="admitted")
    assert transition(rows[0], State.PROVISIONING, reason="provisioning")
    assert transition(rows[0], State.READY, reason="ready")
    assert _value("gangway_admitted_total", tenant="acme", flavor="h100") == admitted + 4
    assert _value(ready_now, workload="cluster", flavor="h100") == ready + 1


@pytest.mark.django_db
def test_a_rolled_back_move_is_not_counted(make_cluster: Any) -> None:
    # django_db without transaction=True: every test runs in a transaction that is rolled
    # back, so nothing commits and nothing may be counted.
    before = _value("gangway_admitted_total", tenant="acme", flavor="h100")
    row = make_cluster(name="rolled", state=State.QUEUED)
    row.save()
    assert transition(row, State.ADMITTED, reason="admitted")
    assert _value("gangway_admitted_total", tenant="acme", flavor="h100") == before


@pytest.mark.django_db
def test_web_requests_are_timed_by_route_not_path(client: Any, settings: Any) -> None:
    labels = {"route": "healthz", "method": "GET", "status": "2xx"}
    before = _value("gangway_http_request_seconds_count", **labels)
    missing = {"route": "unmatched", "method": "GET", "status": "4xx"}
    missing_before = _value("gangway_http_request_seconds_count", **missing)
    assert client.get("/healthz").status_code == 200
    assert client.get("/no/such/page-a1b2c3").status_code == 404
    assert _value("gangway_http_request_seconds_count", **labels) == before + 1
    assert _value("gangway_http_request_seconds_count", **missing) == missing_before + 1


@pytest.mark.django_db
def test_the_months_gpu_hours_cost_and_budgets_are_exported_per_tenant(
    client: Any, settings: Any, monkeypatch: Any, acme: Any, bob: Any, h100: Any
) -> None:
    from datetime import UTC, datetime

    from clusters.api import gauges
    from clusters.models import CostCap, FlavorPrice
    from tests.clusters.rows.test_costs import use

    now = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
    monkeypatch.setattr("django.utils.timezone.now", lambda: now)
    settings.METRICS_TOKEN = TOKEN
    FlavorPrice.objects.create(
        flavor_name="h100", price_per_gpu_hour=Decimal("2.5"), effective_from=now.replace(day=1)
    )
    use(acme, bob, h100, gpus=4, hours=3)  # 12 GPU-hours this month, at 2.50
    acme.monthly_gpu_hour_budget = 500
    acme.save()
    CostCap.objects.create(tenant=acme, username="", soft_limit=Decimal(20), hard_limit=None)
    gauges.forget_month()
    seen = _scrape(client)
    tenant = (("tenant", "acme"),)
    assert seen[("gangway_month_gpu_hours", tenant)] == 12
    assert seen[("gangway_month_cost", tenant)] == 30
    assert seen[("gangway_budget", (("budget", "gpu_hours"), ("tenant", "acme")))] == 500
    assert seen[("gangway_budget", (("budget", "cost_soft"), ("tenant", "acme")))] == 20
    assert ("gangway_budget", (("budget", "cost_hard"), ("tenant", "acme"))) not in seen

    # Read at most once a minute: more use within the minute shows at the next read.
    use(acme, bob, h100, gpus=4, hours=1)
    assert _scrape(client)[("gangway_month_gpu_hours", tenant)] == 12
    gauges.forget_month()
    assert _scrape(client)[("gangway_month_gpu_hours", tenant)] == 16
