"""The cluster list's cache (clusters/api/listcache.py): a page is served again only while
nothing it shows has changed, whatever way the change was written."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from clusters.domain.states import State
from clusters.models import ClusterEvent, ClusterRequest
from clusters.rows import transitions
from tenants.models import Tenant

pytestmark = pytest.mark.django_db

CLUSTERS = "/api/v1/tenants/acme/clusters/"


@pytest.fixture
def listed(make_cluster: Any) -> ClusterRequest:
    cluster = make_cluster(name="listed", state="ready")
    cluster.save()
    return cluster


def _list(api: Any, url: str = CLUSTERS) -> tuple[dict[str, Any], int]:
    with CaptureQueriesContext(connection) as captured:
        response = api.get(url)
    assert response.status_code == 200, response.content
    return response.json(), len(captured)


def _item(body: dict[str, Any], name: str = "listed") -> dict[str, Any]:
    return next(item for item in body["results"] if item["name"] == name)


def test_an_unchanged_page_is_served_again_without_reading_the_rows(
    as_user: Any, bob: Any, listed: ClusterRequest
) -> None:
    api = as_user(bob)
    first, cold = _list(api)
    again, warm = _list(api)
    assert again == first
    # The tenant with the caller's role and the fingerprint; no count, page or events.
    assert warm == 2
    assert cold > warm


def test_a_queryset_update_is_seen_at_once(as_user: Any, bob: Any, listed: ClusterRequest) -> None:
    api = as_user(bob)
    _list(api)
    # update() does not touch updated_at: the fingerprint must not rely on it.
    ClusterRequest.objects.filter(pk=listed.pk).update(state_reason="changed behind the ORM")
    body, _ = _list(api)
    assert _item(body)["state_reason"] == "changed behind the ORM"


def test_a_new_event_is_seen_at_once(as_user: Any, bob: Any, listed: ClusterRequest) -> None:
    api = as_user(bob)
    _list(api)
    transitions.note(listed, reason="warned", message="an event that leaves the row alone")
    body, _ = _list(api)
    assert _item(body)["last_event"]["reason"] == "warned"


def test_an_event_written_any_other_way_is_seen_at_once(
    as_user: Any, bob: Any, listed: ClusterRequest
) -> None:
    # The fingerprint reads no events: inserting one touches its cluster's row (a
    # trigger, clusters/migrations/0010), whichever way it is written.
    api = as_user(bob)
    _list(api)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {ClusterEvent._meta.db_table} (cluster_id, at, actor_name, "
            "from_state, to_state, reason, message) "
            "VALUES (%s, %s, 'system', 'ready', 'ready', 'by_hand', 'written in SQL')",
            [listed.pk, timezone.now()],
        )
    assert _item(_list(api)[0])["last_event"]["reason"] == "by_hand"
    ClusterEvent.objects.bulk_create(
        [
            ClusterEvent(
                cluster_id=listed.pk,
                actor_name="system",
                from_state="ready",
                to_state="ready",
                reason="in_bulk",
            )
        ]
    )
    assert _item(_list(api)[0])["last_event"]["reason"] == "in_bulk"


def test_new_and_deleted_rows_are_seen_at_once(
    as_user: Any, bob: Any, listed: ClusterRequest, make_cluster: Any
) -> None:
    api = as_user(bob)
    assert _list(api)[0]["count"] == 1
    make_cluster(name="second").save()
    assert _list(api)[0]["count"] == 2
    ClusterRequest.objects.filter(name="second").delete()
    body, _ = _list(api)
    assert [item["name"] for item in body["results"]] == ["listed"]


def test_a_request_that_becomes_deleted_leaves_the_list_at_once(
    as_user: Any, bob: Any, listed: ClusterRequest, make_cluster: Any
) -> None:
    # Deleted requests are outside the fingerprint (a list never shows them): moving one
    # there must still change it.
    api = as_user(bob)
    make_cluster(name="second").save()
    assert _list(api)[0]["count"] == 2
    ClusterRequest.objects.filter(name="second").update(state=State.DELETED)
    body, _ = _list(api)
    assert [item["name"] for item in body["results"]] == ["listed"]


def test_the_tenant_and_the_owner_are_part_of_the_page(
    as_user: Any, bob: Any, acme: Tenant, listed: ClusterRequest
) -> None:
    api = as_user(bob)
    _list(api)
    Tenant.objects.filter(pk=acme.pk).update(idle_suspend_minutes=90)
    assert _item(_list(api)[0])["activity"]["idle_suspend_minutes"] == 90
    get_user_model().objects.filter(pk=bob.pk).update(username="robert")
    assert _item(_list(api)[0])["owner"] == "robert"


def test_pages_filters_and_tenants_are_kept_apart(
    as_user: Any, bob: Any, charlie: Any, listed: ClusterRequest, make_cluster: Any
) -> None:
    make_cluster(name="queued", state="queued").save()
    api = as_user(bob)
    assert _list(api)[0]["count"] == 2
    only_ready, _ = _list(api, f"{CLUSTERS}?state=ready")
    assert [item["name"] for item in only_ready["results"]] == ["listed"]
    second_page, _ = _list(api, f"{CLUSTERS}?page_size=1&page=2")
    assert len(second_page["results"]) == 1 and second_page["previous"]
    # Another tenant's member asking for acme's page is refused, cached or not.
    assert as_user(charlie).get(CLUSTERS).status_code in (403, 404)


def test_a_cached_pages_idle_minutes_follow_the_clock(
    as_user: Any, bob: Any, make_cluster: Any, settings: Any, monkeypatch: Any
) -> None:
    now = timezone.now()
    busy = make_cluster(name="busy", state="ready", ready_at=now - timedelta(hours=1))
    busy.last_active_at = busy.activity_checked_at = now - timedelta(seconds=5)
    busy.save()
    idle = make_cluster(name="idle", state="ready", ready_at=now - timedelta(hours=1))
    idle.last_active_at = now - timedelta(seconds=130)
    idle.activity_checked_at = now - timedelta(seconds=10)
    idle.save()
    api = as_user(bob)
    monkeypatch.setattr("django.utils.timezone.now", lambda: now)
    first, _ = _list(api)
    assert _item(first, "idle")["activity"]["idle_minutes"] == 2

    # 50 s on, "idle" has been idle for 3 minutes: the page is served from the cache
    # (no rows read) with the minute it shows now, and reads as a fresh render does.
    later = now + timedelta(seconds=50)
    monkeypatch.setattr("django.utils.timezone.now", lambda: later)
    cached, queries = _list(api)
    assert queries == 2
    assert _item(cached, "idle")["activity"]["idle_minutes"] == 3
    assert _item(cached, "busy")["activity"]["idle_minutes"] == 0
    settings.CLUSTER_LIST_CACHE_SECONDS = 0
    fresh, _ = _list(api)
    assert cached == fresh

    # And a minute later again: the kept page was brought up to date and kept anew.
    settings.CLUSTER_LIST_CACHE_SECONDS = 60
    later = now + timedelta(seconds=110)
    monkeypatch.setattr("django.utils.timezone.now", lambda: later)
    cached, queries = _list(api)
    assert queries == 2 and _item(cached, "idle")["activity"]["idle_minutes"] == 4


def test_a_cached_page_is_the_same_bytes_and_headers_as_a_fresh_one(
    as_user: Any, bob: Any, listed: ClusterRequest, make_cluster: Any, settings: Any
) -> None:
    idle = make_cluster(name="idle", state="ready", ready_at=timezone.now() - timedelta(hours=1))
    idle.last_active_at = timezone.now() - timedelta(minutes=30)
    idle.save()
    api = as_user(bob)
    for url in (CLUSTERS, f"{CLUSTERS}?page_size=1", f"{CLUSTERS}?ordering=name"):
        cold = api.get(url)
        warm = api.get(url, HTTP_ACCEPT="application/json")
        indented = api.get(url, HTTP_ACCEPT="application/json; indent=2")
        settings.CLUSTER_LIST_CACHE_SECONDS = 0
        fresh = api.get(url)
        fresh_indented = api.get(url, HTTP_ACCEPT="application/json; indent=2")
        settings.CLUSTER_LIST_CACHE_SECONDS = 60
        assert cold.content == warm.content == fresh.content
        assert indented.content == fresh_indented.content != fresh.content
        for header in ("Content-Type", "Vary", "Allow"):
            assert cold.get(header) == warm.get(header) == fresh.get(header)


def test_with_the_cache_off_every_list_reads_the_rows(
    as_user: Any, bob: Any, listed: ClusterRequest, settings: Any
) -> None:
    settings.CLUSTER_LIST_CACHE_SECONDS = 0
    api = as_user(bob)
    first, cold = _list(api)
    again, warm = _list(api)
    assert again == first and warm == cold
