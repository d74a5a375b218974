"""The dispatcher's cursor: nothing lost when events commit out of id order, nothing
derived twice, old news not told, and the kick after a notable event's commit."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from clusters.models import ClusterEvent
from clusters.rows.transitions import note, transition
from notifications import outbox, tasks
from notifications.models import Delivery, DispatchCursor, HandledEvent
from tests.notifications.conftest import make_cluster

pytestmark = pytest.mark.django_db


def test_an_event_that_commits_late_behind_handled_ones_is_still_told(
    fast_notify: Any, acme: Any, bob: Any
) -> None:
    a = make_cluster(acme, bob, name="a")
    b = make_cluster(acme, bob, name="b")
    c = make_cluster(acme, bob, name="c")
    for row in (a, b, c):
        transition(row, "ready", reason="ready")
    late = ClusterEvent.objects.get(cluster=b, to_state="ready")
    saved = {f.attname: getattr(late, f.attname) for f in ClusterEvent._meta.concrete_fields}
    late.delete()  # not visible yet: its transaction has not committed
    first = outbox.dispatch_pass()
    assert len(first.created) == 2
    assert first.cursor == 0  # the events are recent: the cursor waits at the horizon
    ClusterEvent.objects.create(**saved)  # it commits now, with its lower id
    second = outbox.dispatch_pass()
    assert [Delivery.objects.get(pk=pk).payload["cluster"] for pk in second.created] == ["b"]
    assert Delivery.objects.count() == 3
    # Later, once past the horizon, the cursor moves over all of them and forgets marks.
    later = outbox.dispatch_pass(now=timezone.now() + timedelta(hours=1))
    assert later.created == []
    assert DispatchCursor.objects.get().last_event_id == ClusterEvent.objects.latest("id").pk
    assert not HandledEvent.objects.exists()


def test_old_news_is_not_told(fast_notify: Any, acme: Any, bob: Any) -> None:
    transition(make_cluster(acme, bob), "ready", reason="ready")
    report = outbox.dispatch_pass(now=timezone.now() + timedelta(days=2))
    assert report.created == [] and report.events >= 1
    assert not Delivery.objects.exists()


def test_a_notable_event_kicks_the_dispatcher_after_commit(
    fast_notify: Any, acme: Any, bob: Any, django_capture_on_commit_callbacks: Any
) -> None:
    cluster = make_cluster(acme, bob, state="ready")
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        note(cluster, reason="extended", message="routine")
    assert callbacks == []  # routine events do not kick
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        note(cluster, reason="expiry_warning", message="expires at 12:00 UTC")
    assert len(callbacks) == 1
    # The kick ran the pass inline (eager Celery): the email went.
    assert tasks.dispatch.name == "notifications.tasks.dispatch"
    row = Delivery.objects.get()
    assert (row.kind, row.status) == ("expiring_soon", "sent")


@pytest.mark.parametrize("owners", [2, 8])
def test_a_pass_reads_its_recipients_in_one_query_per_table(
    owners: int, fast_notify: Any, acme: Any, globex: Any
) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from notifications.models import NotificationPreference
    from tests.factories import MembershipFactory, UserFactory

    for i in range(owners):
        tenant = (acme, globex)[i % 2]
        user = UserFactory(username=f"owner{i}", email=f"owner{i}@example.com")
        MembershipFactory(tenant=tenant, user=user)
        if i == 0:  # one owner has turned e-mail off for this kind
            NotificationPreference.objects.create(user=user, kind="cluster_ready", email=False)
        transition(make_cluster(tenant, user, name=f"c{i}"), "ready", reason="ready")
    with CaptureQueriesContext(connection) as queries:
        report = outbox.dispatch_pass()
    recipient_tables = (
        "tenants_membership",
        "notifications_notificationpreference",
        "notifications_notificationprofile",
        "notifications_tenantwebhook",
    )
    reads = [q["sql"] for q in queries if any(t in q["sql"] for t in recipient_tables)]
    assert len(reads) == 4, reads  # whatever the number of owners and tenants
    told = {Delivery.objects.get(pk=pk).payload["owner"] for pk in report.created}
    assert told == {f"owner{i}" for i in range(1, owners)}


def test_a_pass_reads_the_requests_only_of_the_events_that_may_be_told(
    fast_notify: Any, acme: Any, bob: Any
) -> None:
    """A burst's events are mostly routine (admitted, provisioning): the pass reads the
    request rows (with tenant and owner) of the few that may be notable, in one query."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    routine = [make_cluster(acme, bob, name=f"r{i}", state="queued") for i in range(4)]
    for row in routine:
        transition(row, "admitted", reason="admitted")
    told = make_cluster(acme, bob, name="told")
    transition(told, "ready", reason="ready")
    with CaptureQueriesContext(connection) as queries:
        report = outbox.dispatch_pass()
    assert report.events == 5
    reads = [q["sql"] for q in queries if 'FROM "clusters_clusterrequest"' in q["sql"]]
    assert len(reads) == 1, reads
    assert f"IN ({told.pk})" in reads[0]
    assert [Delivery.objects.get(pk=pk).payload["cluster"] for pk in report.created] == ["told"]
