"""The moves a person or Kueue makes on a row (clusters.rows.lifecycle): each under the
row's lock, audited, and a no-op where the row already is where it was asked to go."""

from __future__ import annotations

from typing import Any

import pytest

from clusters.domain.states import State
from clusters.models import ClusterRequest
from clusters.rows.lifecycle import locked, locked_in, request_deletion, requeue_evicted, suspend
from clusters.rows.transitions import transition
from controlplane.exceptions import ServiceConflict
from tenants.models import AuditEvent

pytestmark = pytest.mark.django_db


def _ready(make_cluster: Any) -> ClusterRequest:
    cluster = make_cluster()
    cluster.save()
    for state in (State.ADMITTED, State.PROVISIONING, State.READY):
        transition(cluster, state, reason="test")
    return cluster


def test_locked_rereads_the_row_and_keeps_the_relations_loaded(make_cluster: Any) -> None:
    cluster = make_cluster()
    cluster.save()
    ClusterRequest.objects.filter(pk=cluster.pk).update(queue_message="changed")
    row = locked(cluster)
    assert row.queue_message == "changed"
    assert row.tenant is cluster.tenant and row.owner is cluster.owner


def test_deletion_is_marked_for_the_provision_pass_audited_and_once(
    make_cluster: Any, bob: Any
) -> None:
    cluster = _ready(make_cluster)
    deleting = request_deletion(cluster, actor=bob, reason="expired")
    assert deleting.state == State.DELETING and deleting.deletion_reason == "expired"
    assert deleting.provision_requested_at is not None
    assert deleting.events.latest("at").message == "expired: its TTL ran out"
    assert AuditEvent.objects.filter(action="cluster.delete").count() == 1
    assert request_deletion(deleting, actor=bob).state == State.DELETING
    assert AuditEvent.objects.filter(action="cluster.delete").count() == 1


def test_suspend_takes_only_a_running_cluster(make_cluster: Any, bob: Any) -> None:
    queued = make_cluster(name="bob-queued")
    queued.save()
    with pytest.raises(ServiceConflict) as refused:
        suspend(queued, actor=bob)
    assert refused.value.code == "invalid_state"
    assert ClusterRequest.objects.get(pk=queued.pk).state == State.QUEUED

    cluster = _ready(make_cluster)
    suspended = suspend(cluster, actor=bob, message="for the demo")
    assert suspended.state == State.SUSPENDED and not suspended.holds_gpus
    assert suspended.ready_at is None and suspended.suspended_at is not None
    assert suspend(suspended, actor=bob).state == State.SUSPENDED  # already: left as it is


def test_an_eviction_queues_the_row_again_with_kueue_s_words(make_cluster: Any) -> None:
    cluster = _ready(make_cluster)
    back = requeue_evicted(
        cluster, reason="Preempted", message="to admit a higher priority", queue_reason="quota"
    )
    assert back.state == State.QUEUED and not back.holds_gpus
    assert (back.queue_reason, back.queue_message) == ("quota", "Kueue: to admit a higher priority")
    assert back.expires_at is None and back.admitted_at is None
    assert AuditEvent.objects.filter(action="cluster.evict").count() == 1
    # A queued row is not evicted again.
    assert requeue_evicted(back, reason="Preempted", message="", queue_reason="quota") == back
    assert AuditEvent.objects.filter(action="cluster.evict").count() == 1


def test_locked_in_refuses_a_row_in_another_state_in_its_words(make_cluster: Any) -> None:
    cluster = make_cluster()
    cluster.save()
    assert locked_in(cluster, State.QUEUED, "Only a queued request").pk == cluster.pk
    with pytest.raises(ServiceConflict) as refused:
        locked_in(cluster, State.READY, "Only a ready cluster can be kept alive")
    assert refused.value.code == "invalid_state"
    assert refused.value.message == "Only a ready cluster can be kept alive; this one is queued."
