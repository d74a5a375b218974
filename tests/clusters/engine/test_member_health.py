"""What reconcile passes record on a member of the fleet (clusters/engine/member_health.py)
and how its rows show as stale in the API's list, cached or not."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from clusters.engine import member_health
from clusters.models import KubeCluster

pytestmark = pytest.mark.django_db

CLUSTERS = "/api/v1/tenants/acme/clusters/"


@pytest.fixture
def cloud() -> KubeCluster:
    return KubeCluster.objects.create(name="cloud", server="http://127.0.0.1:1", placement_order=5)


def test_two_failed_passes_in_a_row_mark_a_member_unreachable_and_one_that_ran_clears_it(
    cloud: KubeCluster,
) -> None:
    member_health.pass_succeeded(cloud)
    assert not member_health.pass_failed(cloud, "connection refused")  # may be a blip
    cloud.refresh_from_db()
    assert (cloud.reachable, cloud.failed_passes) == (True, 1)
    assert cloud.failing_since is not None and cloud.unreachable_since is None

    assert member_health.pass_failed(cloud, "connection refused")
    assert not member_health.pass_failed(cloud, "connection refused")  # marked once
    cloud.refresh_from_db()
    assert cloud.reachable is False
    assert cloud.detect_seconds == pytest.approx(
        (cloud.unreachable_since - cloud.failing_since).total_seconds()
    )
    assert cloud.health_message == "connection refused"

    member_health.pass_succeeded(cloud)
    cloud.refresh_from_db()
    assert cloud.reachable is True
    assert (cloud.failing_since, cloud.unreachable_since, cloud.failed_passes) == (None, None, 0)
    assert cloud.detect_seconds is not None  # the last outage's, kept


def test_the_list_says_which_rows_are_stale_at_once_and_without_a_query_per_row(
    as_user: Any, bob: Any, make_cluster: Any, cloud: KubeCluster
) -> None:
    member_health.pass_succeeded(cloud)
    synced = KubeCluster.objects.get(pk=cloud.pk).last_sync_at
    for i in range(3):
        make_cluster(name=f"up-{i}", state="ready", kube_cluster=cloud).save()
    make_cluster(name="queued", state="queued", kube_cluster=None).save()
    make_cluster(name="home", state="ready", kube_cluster=None).save()
    api = as_user(bob)

    def listed() -> dict[str, Any]:
        response = api.get(CLUSTERS)
        assert response.status_code == 200
        return {item["name"]: item for item in response.json()["results"]}

    assert not any(item["stale"] for item in listed().values())
    for _ in range(member_health.UNREACHABLE_AFTER_FAILURES):
        member_health.pass_failed(cloud, "timed out")
    with CaptureQueriesContext(connection) as few:
        items = listed()
    assert {name for name, item in items.items() if item["stale"]} == {"up-0", "up-1", "up-2"}
    assert items["up-0"]["stale_since"] == synced.isoformat().replace("+00:00", "Z")
    assert items["home"]["stale_since"] is None
    make_cluster(name="up-3", state="ready", kube_cluster=cloud).save()
    with CaptureQueriesContext(connection) as more:
        assert listed()["up-3"]["stale"] is True
    assert len(more) == len(few)

    member_health.pass_succeeded(cloud)
    assert not any(item["stale"] for item in listed().values())


def test_rows_not_placed_are_stale_while_the_home_member_is_unreachable(
    as_user: Any, bob: Any, make_cluster: Any, cloud: KubeCluster
) -> None:
    home = KubeCluster.objects.get(from_settings=True)  # first in order: the home member
    member_health.pass_succeeded(home)
    synced = KubeCluster.objects.get(pk=home.pk).last_sync_at
    make_cluster(name="home", state="ready", kube_cluster=None).save()
    make_cluster(name="queued", state="queued", kube_cluster=None).save()
    make_cluster(name="up", state="ready", kube_cluster=cloud).save()
    api = as_user(bob)

    def listed() -> dict[str, Any]:
        return {item["name"]: item for item in api.get(CLUSTERS).json()["results"]}

    assert not any(item["stale"] for item in listed().values())
    for _ in range(member_health.UNREACHABLE_AFTER_FAILURES):
        member_health.pass_failed(home, "connection refused")
    with CaptureQueriesContext(connection) as few:
        items = listed()
    assert {name for name, item in items.items() if item["stale"]} == {"home"}
    assert items["home"]["stale_since"] == synced.isoformat().replace("+00:00", "Z")
    # The same on the row's own page (read without the list's annotations).
    one = api.get(CLUSTERS + "home/").json()
    assert one["stale"] is True and one["stale_since"] == items["home"]["stale_since"]
    # No query per row: another unplaced row costs the list nothing more.
    make_cluster(name="home-2", state="ready", kube_cluster=None).save()
    with CaptureQueriesContext(connection) as more:
        assert listed()["home-2"]["stale"] is True
    assert len(more) == len(few)

    member_health.pass_succeeded(home)
    assert not any(item["stale"] for item in listed().values())
