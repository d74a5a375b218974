"""Queue controls (clusters.requests.controls): a tenant admin's priority, hold and
release, each with a reason the owner reads, audited; and suspension with a reason."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from clusters.domain.states import State
from clusters.models import ClusterEvent, ClusterRequest
from clusters.queue.admission_pass import run_admission_pass
from clusters.requests import controls, services
from clusters.rows.spec import ClusterSpec
from controlplane.exceptions import ServiceConflict
from tenants.models import AuditEvent

pytestmark = pytest.mark.django_db(transaction=True)


def _create(actor: Any, tenant: Any, flavor: Any, name: str, workers: int = 1) -> ClusterRequest:
    spec = ClusterSpec(flavor=flavor, name=name, workers=workers)
    return services.cluster_request_create(actor=actor, tenant=tenant, spec=spec)


def _positions(*clusters: ClusterRequest) -> list[int | None]:
    return [ClusterRequest.objects.get(pk=c.pk).queue_position for c in clusters]


@pytest.fixture
def full(acme: Any, alice: Any, l4: Any) -> ClusterRequest:
    """acme's two L4 GPUs held by one running cluster: what is asked for next waits."""
    holder = _create(alice, acme, l4, "holder", workers=2)
    run_admission_pass()
    holder.refresh_from_db()
    assert holder.state == State.ADMITTED
    return holder


def test_a_higher_priority_moves_a_request_to_the_front(
    full: Any, acme: Any, alice: Any, bob: Any, l4: Any
) -> None:
    first, second = _create(bob, acme, l4, "first"), _create(bob, acme, l4, "second")
    run_admission_pass()
    assert _positions(first, second) == [1, 2]

    controls.cluster_set_priority(actor=alice, cluster=second, priority=5, reason="demo Friday")
    run_admission_pass()
    assert _positions(first, second) == [2, 1]
    event = ClusterEvent.objects.filter(cluster=second).latest("at")
    assert (event.reason, event.actor_name) == ("priority_changed", "alice")
    assert event.message == "priority 0 -> 5: demo Friday"
    audit = AuditEvent.objects.get(action="cluster.priority")
    assert audit.data == {"before": 0, "after": 5, "reason": "demo Friday"}


def test_only_tenant_admins_set_priority_within_the_range_and_with_a_reason(
    full: Any, acme: Any, alice: Any, bob: Any, l4: Any
) -> None:
    waiting = _create(bob, acme, l4, "waiting")
    with pytest.raises(PermissionDenied):
        controls.cluster_set_priority(actor=bob, cluster=waiting, priority=5, reason="mine")
    with pytest.raises(ValidationError) as out_of_range:
        controls.cluster_set_priority(actor=alice, cluster=waiting, priority=101, reason="x")
    assert out_of_range.value.message_dict == {
        "priority": ["A priority is a whole number from -100 to 100."]
    }
    with pytest.raises(ValidationError) as no_reason:
        controls.cluster_set_priority(actor=alice, cluster=waiting, priority=5, reason="  ")
    assert "reason" in no_reason.value.message_dict
    assert ClusterRequest.objects.get(pk=waiting.pk).priority == 0
    assert not AuditEvent.objects.filter(action="cluster.priority").exists()
    # At creation too: an engineer may not set one.
    with pytest.raises(PermissionDenied):
        services.cluster_request_create(
            actor=bob, tenant=acme, spec=ClusterSpec(flavor=l4, name="pushy", priority=3)
        )


def test_a_held_request_is_passed_over_until_it_is_released(
    full: Any, acme: Any, alice: Any, bob: Any, l4: Any
) -> None:
    first, second = _create(bob, acme, l4, "first"), _create(bob, acme, l4, "second")
    controls.cluster_hold(actor=alice, cluster=first, reason="waiting for the data review")
    first.refresh_from_db()
    assert first.queue_reason == "held"
    assert first.queue_message == "On hold by alice: waiting for the data review"
    run_admission_pass()
    assert _positions(first, second) == [None, 1]

    services.cluster_delete(actor=alice, cluster=full)
    ClusterRequest.objects.filter(pk=full.pk).update(state=State.DELETED, holds_gpus=False)
    run_admission_pass()
    first.refresh_from_db()
    second.refresh_from_db()
    assert (first.state, second.state) == (State.QUEUED, State.ADMITTED)

    controls.cluster_release(actor=alice, cluster=first, reason="review done")
    run_admission_pass()
    first.refresh_from_db()
    assert first.state == State.ADMITTED and first.held_at is None
    reasons = list(
        ClusterEvent.objects.filter(cluster=first).order_by("at").values_list("reason", "message")
    )
    assert ("held", "on hold: waiting for the data review") in reasons
    assert ("released", "released from hold: review done") in reasons
    assert {a.action for a in AuditEvent.objects.filter(object_id=str(first.pk))} >= {
        "cluster.hold",
        "cluster.release",
    }


def test_hold_is_for_queued_requests_and_not_twice(
    full: Any, acme: Any, alice: Any, bob: Any, l4: Any
) -> None:
    with pytest.raises(ServiceConflict, match="Only a queued request can be held"):
        controls.cluster_hold(actor=alice, cluster=full, reason="x")
    waiting = _create(bob, acme, l4, "waiting")
    controls.cluster_hold(actor=alice, cluster=waiting, reason="x")
    with pytest.raises(ServiceConflict, match="already on hold"):
        controls.cluster_hold(actor=alice, cluster=waiting, reason="x")
    with pytest.raises(PermissionDenied):
        controls.cluster_release(actor=bob, cluster=waiting)


def test_under_kueue_the_controls_say_kueue_orders_the_queue(
    settings: Any, full: Any, acme: Any, alice: Any, bob: Any, l4: Any
) -> None:
    waiting = _create(bob, acme, l4, "waiting")
    settings.QUEUE_MODE = "kueue"
    with pytest.raises(ServiceConflict, match="Kueue orders the queue"):
        controls.cluster_hold(actor=alice, cluster=waiting, reason="x")
    assert ClusterRequest.objects.get(pk=waiting.pk).held_at is None


def test_an_admin_suspends_with_a_reason_the_owner_reads(
    acme: Any, alice: Any, bob: Any, l4: Any, as_user: Any
) -> None:
    cluster = _create(bob, acme, l4, "busy")
    run_admission_pass()
    ClusterRequest.objects.filter(pk=cluster.pk).update(state=State.READY)
    response = as_user(alice).post(
        "/api/v1/tenants/acme/clusters/busy/suspend/", {"reason": "the prod launch needs L4s"}
    )
    assert response.status_code == 200, response.content
    messages = [
        e["message"]
        for e in as_user(bob).get("/api/v1/tenants/acme/clusters/busy/").json()["events"]
    ]
    assert "suspended by alice: the prod launch needs L4s" in messages


def test_the_api_sets_priority_and_holds(
    full: Any, acme: Any, alice: Any, bob: Any, l4: Any, as_user: Any
) -> None:
    _create(bob, acme, l4, "waiting")
    url = "/api/v1/tenants/acme/clusters/waiting/"
    assert as_user(bob).post(url + "priority/", {"priority": 9, "reason": "me"}).status_code == 403
    bad = as_user(alice).post(url + "priority/", {"priority": 500, "reason": "x"})
    assert bad.status_code == 400 and "priority" in bad.json()["error"]["fields"]
    ok = as_user(alice).post(url + "priority/", {"priority": 9, "reason": "launch"})
    assert ok.status_code == 200 and ok.json()["priority"] == 9
    held = as_user(alice).post(url + "hold/", {"reason": "budget"})
    assert held.status_code == 200
    assert held.json()["hold_reason"] == "budget"
    assert held.json()["queue"]["message"] == "On hold by alice: budget"
    again = as_user(alice).post(url + "hold/", {"reason": "budget"})
    assert again.status_code == 409
    assert as_user(alice).post(url + "release/", {}).json()["held_at"] is None
