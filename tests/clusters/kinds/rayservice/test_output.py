"""A service as the API returns it (clusters.kinds.rayservice.output): the request's
fields without a cluster's TTL, its serving details with an incremental upgrade's split,
its endpoint, the surge of an upgrade and an autoscaling service's growth."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest

from clusters.kinds.rayservice import endpoint_counts
from clusters.kinds.rayservice.output import ServiceOut, curl_example, endpoint_url, surge_out
from clusters.models import ClusterRequest, Growth, Service, Surge
from clusters.output.request import ClusterOut
from clusters.rows.transitions import note
from clusters.selectors import with_recent_events
from tests.clusters.kinds.rayservice.samples import queued_service

pytestmark = pytest.mark.django_db

OTHER = "rayproject/ray:2.40.0-py310-gpu"
SPLIT = {
    "active": {"cluster": "sd-a", "target_capacity": 60, "traffic_routed_percent": 70},
    "pending": {"cluster": "sd-b", "target_capacity": 40, "traffic_routed_percent": 30},
}


def _out(row: ClusterRequest) -> dict[str, Any]:
    loaded = (
        ClusterRequest.objects.unscoped()
        .select_related("tenant", "service", "surge__flavor", "growth__flavor")
        .get(pk=row.pk)
    )
    return dict(ServiceOut(with_recent_events(loaded)).data)


def test_the_endpoint_is_the_product_s_relay_route(settings: Any) -> None:
    settings.PUBLIC_BASE_URL = "https://gw.example"
    url = endpoint_url("acme", "sd")
    assert url == "https://gw.example/serve/acme/sd/"
    assert curl_example(url, public=True) == "curl https://gw.example/serve/acme/sd/"
    assert curl_example(url, public=False) == (
        'curl -H "Authorization: Bearer $GANGWAY_TOKEN" https://gw.example/serve/acme/sd/'
    )


def test_a_surge_says_whether_it_waits_is_admitted_or_applied(acme: Any, bob: Any, l4: Any) -> None:
    assert surge_out(None) is None
    row = queued_service(acme, bob)
    surge = Surge.objects.create(
        request=row, flavor=l4, gpus=Decimal(1), purpose="upgrade", change={"image": OTHER}
    )
    assert surge_out(surge) is not None
    found = surge_out(surge) or {}
    assert (found["state"], found["image"], found["serve_config_changed"]) == (
        "waiting",
        OTHER,
        False,
    )
    assert (found["flavor"], found["gpus"]) == ("l4", Decimal(1))
    surge.admitted_at = datetime(2026, 11, 2, tzinfo=UTC)
    surge.change = {"serve_config": "applications: []"}
    found = surge_out(surge) or {}
    assert (found["state"], found["image"], found["serve_config_changed"]) == (
        "admitted",
        None,
        True,
    )
    surge.applied_at = surge.admitted_at
    assert (surge_out(surge) or {})["state"] == "applied"


def test_a_fixed_size_service_reads_as_a_request_with_its_serving_details(
    acme: Any, bob: Any, settings: Any
) -> None:
    settings.PUBLIC_BASE_URL = "https://gw.example"
    row = queued_service(acme, bob)
    Service.objects.filter(pk=row.pk).update(
        public=True, requests_total=7, active_cluster="sd-a", serve_endpoints=2
    )
    data = _out(row)
    assert data["name"] == "sd" and data["state"] == "queued"
    assert "ttl_hours" not in data and "suspended_at" not in data and data["endpoints"] is None
    assert set(data) - {"service", "service_endpoint", "upgrade_surge", "autoscale"} <= set(
        ClusterOut.Meta.fields
    )
    serving = data["service"]
    assert serving["upgrade_strategy"] == {"type": "NewCluster", "cluster_upgrade_options": {}}
    assert (serving["active_cluster"], serving["serve_endpoints"]) == ("sd-a", 2)
    assert serving["traffic_split"] is None and serving["last_request_at"] is None
    assert (data["upgrade_surge"], data["autoscale"]) == (None, None)
    assert data["service_endpoint"] == {
        "url": "https://gw.example/serve/acme/sd/",
        "public": True,
        "requests": 7,
        "curl": "curl https://gw.example/serve/acme/sd/",
    }
    # A request relayed since is counted (flushed to the row or still in the cache), and
    # the last one shown.
    endpoint_counts.request_counted(row.pk)
    data = _out(row)
    assert data["service_endpoint"]["requests"] == 8
    assert data["service"]["last_request_at"] is not None


def test_an_upgrading_autoscaling_service_shows_its_split_surge_and_growth(
    acme: Any, bob: Any, l4: Any
) -> None:
    row = queued_service(acme, bob)
    ClusterRequest.objects.filter(pk=row.pk).update(kind="prod", min_workers=1, max_workers=3)
    Service.objects.filter(pk=row.pk).update(traffic=SPLIT, upgrading=True, pending_cluster="sd-b")
    Surge.objects.create(
        request=row,
        flavor=l4,
        gpus=Decimal(1),
        purpose="upgrade",
        change={"image": OTHER},
        queue_position=2,
        queue_reason="quota",
        queue_message="waits for 1 l4 GPU",
    )
    Growth.objects.create(
        request=row, flavor=l4, gpus=Decimal(2), workers=2, admitted_at=datetime.now(UTC)
    )
    note(row, reason="growth_reclaimed", message="shrunk to 1 worker for acme's quota")
    data = _out(row)
    assert data["service"]["traffic_split"] == SPLIT
    assert data["service"]["upgrading"] is True
    surge = data["upgrade_surge"]
    assert (surge["state"], surge["image"], surge["position"], surge["reason"]) == (
        "waiting",
        OTHER,
        2,
        "quota",
    )
    assert surge["message"] == "waits for 1 l4 GPU"
    autoscale = data["autoscale"]
    assert (autoscale["min_workers"], autoscale["max_workers"]) == (1, 3)
    assert autoscale["may_run_workers"] == 3  # its guaranteed worker and the admitted two
    assert (autoscale["growth"]["state"], autoscale["growth"]["workers"]) == ("admitted", 2)
    assert autoscale["last_reclaim"]["message"] == "shrunk to 1 worker for acme's quota"
