"""What the cluster endpoints carry: list items the newest event, the detail the recent
history (capped), and query counts that do not grow with the rows or their histories."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from clusters.models import ClusterEvent, ClusterRequest
from clusters.queue import dry_run_cache as recorded
from clusters.selectors import EVENTS_SHOWN
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

CLUSTERS = "/api/v1/tenants/acme/clusters/"


def _fill(tenant: Any, flavor: Any, owner: Any, count: int, events_each: int) -> None:
    """``count`` ready clusters of ``owner``, each with ``events_each`` events."""
    start = ClusterRequest.objects.count()
    clusters = ClusterRequest.objects.bulk_create(
        ClusterRequest(
            tenant=tenant,
            owner=owner,
            name=f"c{start + i}",
            kind="dev",
            flavor=flavor,
            workers=1,
            gpus=1,
            state="ready",
            admitted_at=timezone.now(),
        )
        for i in range(count)
    )
    ClusterEvent.objects.bulk_create(
        ClusterEvent(
            cluster=cluster,
            actor_name="system",
            from_state="provisioning",
            to_state="ready",
            reason=f"r{n}",
        )
        for cluster in clusters
        for n in range(events_each)
    )


def _count(call: Any) -> int:
    with CaptureQueriesContext(connection) as captured:
        response = call()
    assert response.status_code < 300, response.content
    return len(captured)


def test_list_items_carry_the_newest_event_only(
    as_user: Any, bob: Any, acme: Any, h100: Any
) -> None:
    _fill(acme, h100, bob, 2, 3)
    _fill(acme, h100, bob, 1, 0)
    items = as_user(bob).get(CLUSTERS).json()["results"]
    by_name = {item["name"]: item for item in items}
    assert all("events" not in item for item in items)
    # bulk_create gives the events one timestamp per batch: the highest id is the newest.
    assert by_name["c0"]["last_event"]["reason"] == "r2"
    assert by_name["c1"]["last_event"]["reason"] == "r2"
    assert by_name["c2"]["last_event"] is None
    assert set(by_name["c0"]["last_event"]) == {
        "at",
        "actor_name",
        "from_state",
        "to_state",
        "reason",
        "message",
    }


def test_detail_carries_the_newest_events_oldest_first(
    as_user: Any, bob: Any, acme: Any, h100: Any
) -> None:
    _fill(acme, h100, bob, 1, EVENTS_SHOWN + 5)
    body = as_user(bob).get(f"{CLUSTERS}c0/").json()
    reasons = [event["reason"] for event in body["events"]]
    assert reasons == [f"r{n}" for n in range(5, EVENTS_SHOWN + 5)]
    assert body["last_event"]["reason"] == f"r{EVENTS_SHOWN + 4}"


def test_write_responses_carry_the_events(as_user: Any, bob: Any, acme: Any) -> None:
    response = as_user(bob).post(CLUSTERS, {"flavor": "h100", "name": "fresh"}, format="json")
    assert response.status_code == 201, response.content
    assert [event["reason"] for event in response.json()["events"]] == ["requested"]


def test_a_create_and_a_delete_answer_what_a_read_of_the_row_answers(
    as_user: Any, bob: Any, acme: Any
) -> None:
    # The create answers from the row it saved instead of reading it again; a read of
    # the row must not tell a different story, to the byte.
    api = as_user(bob)
    body = {"flavor": "h100", "name": "same", "env": {"B": "2", "A": "1"}, "ttl_hours": 3}
    created = api.post(CLUSTERS, body, format="json")
    assert created.status_code == 201, created.content
    read = api.get(f"{CLUSTERS}same/")
    assert created.content == read.content
    # So does a delete (the row stays `deleting` here: no worker runs).
    deleted = api.delete(f"{CLUSTERS}same/")
    assert deleted.status_code == 202, deleted.content
    assert deleted.json()["state"] == "deleting"
    assert deleted.content == api.get(f"{CLUSTERS}same/").content


# The pinned counts, inside the test's transaction (a service's atomic block adds a
# SAVEPOINT and its RELEASE here; in production it is BEGIN/COMMIT, not counted):
# list = tenant with role, the list cache's fingerprint, count, page, newest events;
# detail = tenant with role, row, events; create = tenant with role and the flavor its
# body names (one query: tenants.selectors.tenant_role_and_flavor), savepoint,
# the tenant's lock, one read of what the checks ask (whether the name is taken, the hard
# cost caps, the owner's caps, the tenant's own quota and the default priority class:
# clusters/requests/locked_reads.py), one insert of the row with its first event and its
# audit record (controlplane/inserts.py), release (neither the saved row nor its events
# are read again: the service hands back the one event it wrote). The
# dry-run is counted cold (its per-process cache of the recorded pass dropped: a warm
# one reads only the digest and the flavors' freshness); cold adds those two reads to
# the snapshot's (two of which read the requests' surges and growths), which it reads in
# a transaction of its own with JIT off (SAVEPOINT, set_config, RELEASE here).
# "Could it ever fit?" reads the cohort's tree only for a request that does not fit on
# the tenant's own quota (services.request_never_fits); these fit.
# dry-run: two queries for the fleet (its members, stock and allow-lists in one; the
# caps on tenants' quotas per member in the other).
# Priority classes and money caps (docs/preemption.md, docs/cost.md): the dry-run
# validates twice (the request, then whether it could ever fit), each time reading the
# default class and the hard cost caps, and its decision and ETA read every class; the
# detail reads its workers' GPU readings (once admitted).
PINNED = {"list": 5, "detail": 4, "create": 6, "dry-run": 29}


@pytest.mark.parametrize("what", sorted(PINNED))
def test_query_counts_do_not_grow_with_rows(
    as_user: Any, bob: Any, acme: Any, h100: Any, what: str
) -> None:
    api = as_user(bob)
    # Rows of someone else: bob's own would meet his per-engineer caps.
    owner = UserFactory(username="carol")
    calls = {
        "list": lambda: api.get(CLUSTERS),
        "detail": lambda: api.get(f"{CLUSTERS}c0/"),
        "create": lambda: api.post(CLUSTERS, {"flavor": "h100"}, format="json"),
        "dry-run": lambda: api.post(f"{CLUSTERS}dry-run/", {"flavor": "h100"}, format="json"),
    }
    counts = []
    for total, events_each in ((2, 2), (20, 30)):
        ClusterRequest.objects.exclude(owner=owner).delete()  # what create left
        _fill(acme, h100, owner, total - ClusterRequest.objects.count(), events_each)
        recorded.forget()
        counts.append(_count(calls[what]))
    assert counts == [PINNED[what]] * 2, counts
