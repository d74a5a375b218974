"""Whole-fleet passes are coalesced: a burst of nudges sends a bounded number of passes.

These tests publish to the real Redis broker, on a queue of their own that no worker
reads, and count the messages there — what a worker would have to run.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from django.conf import settings
from django.db import connection
from django.utils import timezone

from clusters import tasks
from clusters.models import PendingPass
from clusters.queue.admission_pass import _LOCK_KEY
from clusters.rows import enqueue
from tests.clusters.conftest import Broker

CREATE = "/api/v1/tenants/acme/clusters/"


@pytest.fixture
def roomy_acme(acme: Any) -> Any:
    """acme with caps high enough for a burst of 200 dev clusters by one engineer."""
    acme.max_dev_clusters_per_user = 1000
    acme.max_dev_gpus_per_user = 1000
    acme.save()
    return acme


def test_a_burst_of_creates_sends_one_admission_pass(
    broker: Broker, roomy_acme: Any, bob: Any, as_user: Any
) -> None:
    client = as_user(bob)
    for i in range(200):
        response = client.post(CREATE, {"flavor": "h100", "name": f"burst-{i}"}, format="json")
        assert response.status_code == 201, response.content
    # 200 requests queued; one admission pass is pending, not 200.
    assert len(broker.tasks(enqueue.ADMISSION_PASS)) == 1
    assert PendingPass.objects.get(name="admission").requested_at is not None

    # The pass starts (and admits what fits): nudges from now on ask for the next pass.
    admitted = tasks.admission_pass()
    assert admitted, "acme's own quota admits some of the burst"
    assert PendingPass.objects.get(name="admission").requested_at is None
    response = client.post(CREATE, {"flavor": "h100", "name": "after-the-pass"}, format="json")
    assert response.status_code == 201, response.content
    assert len(broker.tasks(enqueue.ADMISSION_PASS)) == 2


def test_a_nudge_while_a_pass_is_pending_writes_nothing(broker: Broker) -> None:
    """Most nudges of a burst find the pass already claimed: they only read the claim.
    (An upsert that changes nothing still locks the row, which stamps the row's xmax
    and makes the caller's statement a transaction whose commit waits for the disk.)"""

    def row_version() -> tuple[str, str]:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT xmin::text, xmax::text FROM clusters_pendingpass WHERE name = %s",
                ["reconcile"],
            )
            row = cursor.fetchone()
            assert row is not None
            return row[0], row[1]

    assert enqueue.request_pass(enqueue.RECONCILE)
    claimed = row_version()
    assert not any(enqueue.request_pass(enqueue.RECONCILE) for _ in range(20))
    assert row_version() == claimed
    assert len(broker.tasks(enqueue.RECONCILE)) == 1


def test_a_burst_of_reconcile_nudges_sends_one_delayed_pass(broker: Broker) -> None:
    sent = [enqueue.request_pass(enqueue.RECONCILE, countdown=0.5) for _ in range(100)]
    assert sent.count(True) == 1
    (message,) = broker.tasks(enqueue.RECONCILE)
    assert message["headers"]["eta"], "the pass waits so that later nudges share it"


def test_a_lost_pass_message_is_resent_by_the_sweeper(broker: Broker) -> None:
    assert enqueue.request_pass(enqueue.ADMISSION_PASS)
    broker.drain()  # the message is lost (a broker that forgot it, a crash after claim)
    assert not enqueue.request_pass(enqueue.ADMISSION_PASS), "still claimed: not re-sent"
    stale = timezone.now() - timedelta(seconds=settings.SWEEP_STALE_SECONDS + 1)
    PendingPass.objects.filter(name="admission").update(requested_at=stale)

    tasks.sweep()

    assert len(broker.tasks(enqueue.ADMISSION_PASS)) == 1
    # The claim was renewed: the next sweep does not send it again at once.
    tasks.sweep()
    assert len(broker.tasks(enqueue.ADMISSION_PASS)) == 1


def test_a_pass_that_finds_another_running_asks_again(broker: Broker) -> None:
    db = settings.DATABASES["default"]
    other = psycopg.connect(
        host=db["HOST"], port=db["PORT"] or 5432, user=db["USER"], dbname=db["NAME"]
    )
    try:
        other.execute("SELECT pg_advisory_lock(%s)", [_LOCK_KEY])  # "another pass"
        assert tasks.admission_pass() == []
        (message,) = broker.tasks(enqueue.ADMISSION_PASS)
        assert message["headers"]["eta"], "asked again, a little later"
        assert PendingPass.objects.get(name="admission").requested_at is not None
    finally:
        other.close()
    connection.close()


def test_a_reconcile_that_finds_another_running_asks_again(broker: Broker) -> None:
    from clusters.engine.reconciler import _LOCK_KEY as RECONCILE_LOCK

    db = settings.DATABASES["default"]
    other = psycopg.connect(
        host=db["HOST"], port=db["PORT"] or 5432, user=db["USER"], dbname=db["NAME"]
    )
    try:
        other.execute("SELECT pg_advisory_lock(%s)", [RECONCILE_LOCK])
        assert tasks.reconcile() == {"busy": 1}
        assert len(broker.tasks(enqueue.RECONCILE)) == 1
    finally:
        other.close()


def test_a_pass_asked_for_soon_after_the_last_one_started_waits_for_its_interval(
    broker: Broker, settings: Any
) -> None:
    settings.ADMISSION_PASS_INTERVAL_SECONDS = 30.0
    # A quiet system: no pass has started lately, so the one asked for starts at once.
    assert enqueue.request_pass(enqueue.ADMISSION_PASS)
    (first,) = broker.tasks(enqueue.ADMISSION_PASS)
    assert first["headers"]["eta"] is None
    broker.drain()

    enqueue.pass_started(enqueue.ADMISSION_PASS)  # the pass runs ...
    started = PendingPass.objects.get(name="admission").started_at
    assert started is not None
    before = time.monotonic()
    assert enqueue.request_pass(enqueue.ADMISSION_PASS)  # ... and a nudge arrives meanwhile
    took = timedelta(seconds=time.monotonic() - before)
    (paced,) = broker.tasks(enqueue.ADMISSION_PASS)
    eta = datetime.fromisoformat(paced["headers"]["eta"])
    # The countdown is read from one clock reading and the eta from a later one, so
    # the eta may pass the interval's end by what the call itself took, never more.
    assert started + timedelta(seconds=29) < eta <= started + timedelta(seconds=30) + took

    # Once the interval has passed, a nudge starts the next pass at once again.
    broker.drain()
    enqueue.pass_started(enqueue.ADMISSION_PASS)
    PendingPass.objects.filter(name="admission").update(
        started_at=timezone.now() - timedelta(seconds=31)
    )
    assert enqueue.request_pass(enqueue.ADMISSION_PASS)
    (later,) = broker.tasks(enqueue.ADMISSION_PASS)
    assert later["headers"]["eta"] is None


def test_the_provision_pass_is_paced_unless_it_left_rows_marked(
    broker: Broker, settings: Any
) -> None:
    settings.PROVISION_PASS_INTERVAL_SECONDS = 30.0
    assert enqueue.request_pass(enqueue.PROVISION_REQUESTED)  # a quiet system: at once
    (first,) = broker.tasks(enqueue.PROVISION_REQUESTED)
    assert first["headers"]["eta"] is None
    broker.drain()
    enqueue.pass_started(enqueue.PROVISION_REQUESTED)
    started = PendingPass.objects.get(name="provision").started_at
    assert started is not None
    # A delete's nudge while a pass runs: the next pass waits for the interval's end.
    asked = time.monotonic()
    assert enqueue.request_pass(enqueue.PROVISION_REQUESTED)
    # The countdown is reckoned a moment before Celery adds it to its own "now": the ETA
    # may pass the interval's end by at most the time the call took.
    took = timedelta(seconds=time.monotonic() - asked, milliseconds=1)
    (paced,) = broker.tasks(enqueue.PROVISION_REQUESTED)
    eta = datetime.fromisoformat(paced["headers"]["eta"])
    assert started + timedelta(seconds=29) < eta <= started + timedelta(seconds=30) + took
    # A pass that took a full batch asks for the next one at once.
    broker.drain()
    enqueue.pass_started(enqueue.PROVISION_REQUESTED)
    assert enqueue.request_pass(enqueue.PROVISION_REQUESTED, paced=False)
    (at_once,) = broker.tasks(enqueue.PROVISION_REQUESTED)
    assert at_once["headers"]["eta"] is None


def test_a_burst_of_notable_events_sends_one_dispatch_pass(
    broker: Broker, acme: Any, bob: Any
) -> None:
    from clusters.models import ClusterRequest
    from clusters.rows.transitions import transition
    from notifications import enqueue as notify
    from notifications import tasks as notify_tasks
    from tenants.models import GpuFlavor

    rows = [
        ClusterRequest.objects.create(
            tenant=acme,
            owner=bob,
            name=f"n{i}",
            flavor=GpuFlavor.objects.get(name="l4"),
            gpus=1,
            state="provisioning",
        )
        for i in range(30)
    ]
    for row in rows:  # each its own transaction: 30 notable events, 30 kicks
        transition(row, "ready", reason="ready")
    assert len(broker.tasks(notify.DISPATCH)) == 1
    assert PendingPass.objects.get(name=notify.DISPATCH_PENDING).requested_at is not None

    # The pass starts: the next notable event asks for the next pass.
    broker.drain()
    notify_tasks.dispatch()
    assert PendingPass.objects.get(name=notify.DISPATCH_PENDING).requested_at is None
    transition(rows[0], "deleting", reason="deleted")
    transition(rows[0], "failed", reason="failed", message="boom")
    assert len(broker.tasks(notify.DISPATCH)) == 1


def test_a_claim_reads_the_last_start_as_an_aware_timestamp_on_any_database() -> None:
    # SQLite (make run) returns the text or a naive datetime where PostgreSQL returns an
    # aware one; the pacing subtracts it from an aware "now".
    aware = datetime(2026, 11, 24, 20, 11, 2, 123456, tzinfo=UTC)
    assert enqueue._aware("2026-11-24 20:11:02.123456") == aware
    assert enqueue._aware(aware.replace(tzinfo=None)) == aware
    assert enqueue._aware(aware) is aware
    assert enqueue._aware(None) is None
