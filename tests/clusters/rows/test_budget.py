"""Monthly GPU-hour budgets: what a tenant used this UTC month, the banner of its pages
from 80% on, the "deprioritise" policy for new dev requests (said by the dry-run before
submission, recorded in the timeline after), and the budget set through the tenant API.

The clock is fixed at 2026-11-20 12:00 UTC; the month began Nov 1.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.test import Client

from clusters.models import ClusterEvent, ClusterRequest
from clusters.requests.dry_run import dry_run_verdict
from clusters.rows import usage
from clusters.rows.spec import ClusterSpec
from tenants import services as tenant_services
from tenants.models import AuditEvent
from tests.factories import usage_span

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _fixed_clock(monkeypatch: Any) -> None:
    monkeypatch.setattr("django.utils.timezone.now", lambda: NOW)


def use(tenant: Any, owner: Any, flavor: Any, gpu_hours: int | str) -> None:
    """``gpu_hours`` of use this month: that many GPUs for one hour on Nov 2."""
    start = datetime(2026, 11, 2, 10, tzinfo=UTC)
    usage_span(
        tenant=tenant,
        owner=owner,
        flavor=flavor,
        gpus=gpu_hours,
        start=start,
        end=start.replace(hour=11),
    )


def client_for(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_month_counts_only_its_own_part_of_spans(acme: Any, bob: Any, h100: Any) -> None:
    # 10 GPUs from Oct 31 23:00 to Nov 1 01:00: one hour in November.
    usage_span(
        tenant=acme,
        owner=bob,
        flavor=h100,
        gpus=10,
        start=datetime(2026, 10, 31, 23, tzinfo=UTC),
        end=datetime(2026, 11, 1, 1, tzinfo=UTC),
    )
    # 2 GPUs since Nov 20 09:00, still held: 3 hours to now.
    usage_span(
        tenant=acme,
        owner=bob,
        flavor=h100,
        gpus=2,
        start=datetime(2026, 11, 20, 9, tzinfo=UTC),
        end=None,
    )
    assert usage.month_gpu_hours(tenant=acme) == 16
    assert usage.budget_status(tenant=acme) is None  # no budget, no status
    acme.monthly_gpu_hour_budget = 20
    status = usage.budget_status(tenant=acme)
    assert status is not None and status.percent == 80 and status.warns and not status.over


@pytest.mark.parametrize(
    ("used", "shown"),
    [("790", None), ("799.9", None), ("800", "80%"), ("830", "83%"), ("1000", "100%")],
)
def test_the_banner_appears_from_80_percent(
    acme: Any, bob: Any, h100: Any, used: str, shown: str | None
) -> None:
    acme.monthly_gpu_hour_budget = 1000
    acme.save()
    use(acme, bob, h100, used)
    for url in ("/t/acme/", "/t/acme/usage/"):
        page = client_for(bob).get(url).content.decode()
        if shown is None:
            assert "data-budget-percent" not in page, url
        else:
            expected = f"acme has used {shown} of its 1,000 GPU-hour budget for November."
            assert expected in page, url


def test_at_100_percent_the_banner_says_which_policy_applies(
    acme: Any, bob: Any, h100: Any, settings: Any
) -> None:
    acme.monthly_gpu_hour_budget = 10
    acme.save()
    use(acme, bob, h100, 12)
    settings.BUDGET_POLICY = "warn"
    page = client_for(bob).get("/t/acme/").content.decode()
    assert "acme has used 120% of its 10 GPU-hour budget for November." in page
    assert "The platform's policy is to warn: requests still queue at their usual" in page
    assert 'class="banner banner-error"' in page
    settings.BUDGET_POLICY = "deprioritise"
    page = client_for(bob).get("/t/acme/").content.decode()
    assert (
        "The platform's policy is to deprioritise: new dev requests queue at the lowest "
        "priority until the month ends." in page
    )


def test_a_tenant_without_a_budget_has_no_banner(acme: Any, bob: Any, h100: Any) -> None:
    use(acme, bob, h100, 5000)
    assert "data-budget-percent" not in client_for(bob).get("/t/acme/").content.decode()


def _request(acme: Any, bob: Any, h100: Any, name: str) -> ClusterRequest:
    from clusters.requests import services

    spec = ClusterSpec(flavor=h100, kind="dev", workers=1, name=name)
    return services.cluster_request_create(actor=bob, tenant=acme, spec=spec)


def test_deprioritise_lowers_a_new_dev_request_and_says_why(
    acme: Any, bob: Any, h100: Any, settings: Any
) -> None:
    settings.BUDGET_POLICY = "deprioritise"
    acme.monthly_gpu_hour_budget = 10
    acme.save()
    under = _request(acme, bob, h100, "bob-under")
    assert under.priority == 0
    assert not ClusterEvent.objects.filter(cluster=under, reason="over_budget").exists()
    use(acme, bob, h100, 10)  # exactly at the budget
    over = _request(acme, bob, h100, "bob-over")
    over.refresh_from_db()
    assert over.priority == settings.CLUSTER_PRIORITY_MIN
    event = ClusterEvent.objects.get(cluster=over, reason="over_budget")
    assert event.message == (
        "Queued at the lowest priority (-100): acme has used 100% of its 10 GPU-hour "
        "budget this month, and the budget policy is to deprioritise."
    )
    assert event.actor == bob
    under.refresh_from_db()
    assert under.priority == 0  # requests made before are left as they are


def test_warn_does_not_lower_priority(acme: Any, bob: Any, h100: Any, settings: Any) -> None:
    settings.BUDGET_POLICY = "warn"
    acme.monthly_gpu_hour_budget = 10
    acme.save()
    use(acme, bob, h100, 50)
    cluster = _request(acme, bob, h100, "bob-warned")
    cluster.refresh_from_db()
    assert cluster.priority == 0
    assert not ClusterEvent.objects.filter(cluster=cluster, reason="over_budget").exists()


def test_the_dry_run_says_it_before_submission(
    acme: Any, bob: Any, h100: Any, settings: Any, as_user: Any
) -> None:
    settings.BUDGET_POLICY = "deprioritise"
    acme.monthly_gpu_hour_budget = 10
    acme.save()
    spec = ClusterSpec(flavor=h100, kind="dev", workers=1)
    assert dry_run_verdict(tenant=acme, owner=bob, spec=spec)["budget_note"] == ""
    use(acme, bob, h100, 11)
    rows = ClusterRequest.objects.count()
    verdict = dry_run_verdict(tenant=acme, owner=bob, spec=spec)
    assert verdict["budget_note"] == "Over budget: this request will queue at the lowest priority"
    body = as_user(bob).post(
        "/api/v1/tenants/acme/clusters/dry-run/", {"flavor": "h100"}, format="json"
    )
    assert body.status_code == 200
    assert body.json()["budget_note"] == verdict["budget_note"]
    panel = client_for(bob).post(
        "/t/acme/clusters/new/verdict/", {"kind": "dev", "flavor": "h100", "workers": 1}
    )
    assert (
        '<p class="help warn" data-budget-note>Over budget: this request will queue at the '
        "lowest priority.</p>" in panel.content.decode()
    )
    assert ClusterRequest.objects.count() == rows  # the dry-run writes nothing


def test_the_budget_is_set_through_the_tenant_api_and_audited(
    acme: Any, root: Any, alice: Any, as_user: Any
) -> None:
    api = as_user(root)
    response = api.patch(
        "/api/v1/tenants/acme/", {"policy": {"monthly_gpu_hour_budget": 1000}}, format="json"
    )
    assert response.status_code == 200
    assert response.json()["policy"]["monthly_gpu_hour_budget"] == 1000
    acme.refresh_from_db()
    assert acme.monthly_gpu_hour_budget == 1000
    event = AuditEvent.objects.filter(action="tenant.update").latest("id")
    assert event.data == {
        "before": {"monthly_gpu_hour_budget": None},
        "after": {"monthly_gpu_hour_budget": 1000},
    }
    assert event.actor == root and event.tenant == acme
    cleared = api.patch(
        "/api/v1/tenants/acme/", {"policy": {"monthly_gpu_hour_budget": None}}, format="json"
    )
    assert cleared.json()["policy"]["monthly_gpu_hour_budget"] is None


@pytest.mark.parametrize("value", [0, -5, "lots", 100_000_001])
def test_a_bad_budget_is_refused_and_changes_nothing(
    acme: Any, root: Any, as_user: Any, value: Any
) -> None:
    audits = AuditEvent.objects.count()
    response = as_user(root).patch(
        "/api/v1/tenants/acme/", {"policy": {"monthly_gpu_hour_budget": value}}, format="json"
    )
    assert response.status_code == 400
    assert "policy.monthly_gpu_hour_budget" in response.json()["error"]["fields"]
    acme.refresh_from_db()
    assert acme.monthly_gpu_hour_budget is None
    assert AuditEvent.objects.count() == audits


def test_only_platform_admins_set_a_budget(acme: Any, alice: Any, as_user: Any) -> None:
    response = as_user(alice).patch(
        "/api/v1/tenants/acme/", {"policy": {"monthly_gpu_hour_budget": 5}}, format="json"
    )
    assert response.status_code == 403
    acme.refresh_from_db()
    assert acme.monthly_gpu_hour_budget is None


def test_the_service_refuses_a_zero_budget(acme: Any, root: Any) -> None:
    with pytest.raises(ValidationError) as caught:
        tenant_services.tenant_update(
            actor=root, tenant=acme, changes={"monthly_gpu_hour_budget": 0}
        )
    assert "monthly_gpu_hour_budget" in caught.value.message_dict
