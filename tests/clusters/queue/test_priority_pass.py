"""Priority classes through a real admission pass on PostgreSQL (docs/preemption.md): an
urgent request preempts a low one (warned with its class's notice, then stopped), and a
low one inside its minimum run time is not preempted, which the waiting request's
reason and ETA say."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from clusters.domain.states import State
from clusters.models import ClusterEvent, ClusterRequest
from clusters.queue.admission_pass import run_admission_pass
from clusters.requests import services
from clusters.rows.spec import ClusterSpec
from clusters.rows.transitions import transition
from tenants.models import Membership, PriorityClass, Quota, Role

pytestmark = pytest.mark.django_db


def _klass(name: str, value: int, **fields: Any) -> PriorityClass:
    # The seeded classes may be there (or flushed): set them to what the test needs.
    klass, _ = PriorityClass.objects.update_or_create(
        name=name,
        defaults={
            "value": value,
            "may_preempt": False,
            "min_run_seconds": 0,
            "checkpoint_grace_seconds": 0,
            "notice_seconds": None,
            **fields,
        },
    )
    return klass


def _running(actor: Any, tenant: Any, flavor: Any, name: str, klass: PriorityClass) -> int:
    """A ready prod cluster of one whole node (8 GPUs) in ``klass``."""
    row = services.cluster_request_create(
        actor=actor, tenant=tenant, spec=ClusterSpec(name=name, kind="prod", flavor=flavor)
    )
    ClusterRequest.objects.filter(pk=row.pk).update(priority_class=klass)
    assert run_admission_pass().admitted == [row.pk]
    row = ClusterRequest.objects.get(pk=row.pk)
    transition(row, State.PROVISIONING, reason="applied")
    transition(row, State.READY, reason="ready", ready_at=timezone.now())
    return row.pk


def _urgent(actor: Any, tenant: Any, flavor: Any, klass: PriorityClass) -> int:
    row = services.cluster_request_create(
        actor=actor, tenant=tenant, spec=ClusterSpec(name="urgent", kind="prod", flavor=flavor)
    )
    ClusterRequest.objects.filter(pk=row.pk).update(priority_class=klass)
    return row.pk


def _fleet(h100: Any, quotas: dict[Any, int]) -> None:
    """16 h100 GPUs (two nodes), each tenant's nominal quota, no borrowing, and
    production clusters requested by the tenants' members (made admins)."""
    Membership.objects.filter(tenant__in=list(quotas)).update(role=Role.ADMIN)
    h100.node_count = 2
    h100.save()
    for tenant, gpus in quotas.items():
        Quota.objects.filter(tenant=tenant, flavor=h100).update(gpus=gpus, borrow_limit=0)


def test_an_urgent_request_preempts_the_low_one_with_its_notice(
    settings: Any, alice: Any, charlie: Any, acme: Any, globex: Any, h100: Any
) -> None:
    settings.RECLAIM_GRACE_SECONDS = 3600
    low = _klass("low", -100, notice_seconds=600)
    high = _klass("high", 100)
    urgent = _klass("urgent", 1000, may_preempt=True)
    _fleet(h100, {acme: 8, globex: 16})
    train = _running(alice, acme, h100, "bob-train", low)
    steady = _running(charlie, globex, h100, "steady", high)

    need = _urgent(charlie, globex, h100, urgent)
    before = timezone.now()
    result = run_admission_pass()
    after = timezone.now()
    assert result.admitted == [] and result.suspended == []
    victim = ClusterRequest.objects.get(pk=train)
    # The low class's notice (10 min), not the platform's grace (1 h).
    assert victim.reclaim_after is not None
    assert before + timedelta(seconds=600) <= victim.reclaim_after <= after + timedelta(seconds=600)
    warning = ClusterEvent.objects.get(cluster=victim, reason="preemption_notice")
    assert "the urgent class" in warning.message and "globex" in warning.message
    assert ClusterRequest.objects.get(pk=steady).reclaim_after is None
    waiting = ClusterRequest.objects.get(pk=need)
    assert waiting.queue_reason == "reclaim_pending"
    assert waiting.queue_eta == victim.reclaim_after
    assert "being preempted" in waiting.queue_message and "acme" not in waiting.queue_message

    # At its deadline the low cluster is stopped (suspended, never deleted), and the
    # urgent one starts on the next pass.
    ClusterRequest.objects.filter(pk=victim.pk).update(
        reclaim_after=timezone.now() - timedelta(seconds=1)
    )
    assert run_admission_pass().suspended == [victim.pk]
    assert ClusterRequest.objects.get(pk=victim.pk).state == State.SUSPENDED
    assert run_admission_pass().admitted == [need]


def test_a_low_request_in_its_minimum_run_time_is_not_preempted(
    settings: Any, alice: Any, charlie: Any, acme: Any, globex: Any, h100: Any
) -> None:
    settings.RECLAIM_GRACE_SECONDS = 3600
    low = _klass("low", -100, min_run_seconds=1800, notice_seconds=300)
    high = _klass("high", 100, min_run_seconds=3600)
    urgent = _klass("urgent", 1000, may_preempt=True)
    _fleet(h100, {acme: 16, globex: 8})
    train = _running(alice, acme, h100, "bob-train", low)
    _running(charlie, globex, h100, "steady", high)
    # bob-train has run 18 of its 30 minutes: protected for 12 more.
    ready_at = timezone.now() - timedelta(minutes=18)
    ClusterRequest.objects.filter(pk=train).update(ready_at=ready_at)

    need = _urgent(alice, acme, h100, urgent)
    result = run_admission_pass()
    assert result.admitted == []
    assert not ClusterRequest.objects.filter(reclaim_after__isnull=False).exists()
    assert not ClusterEvent.objects.filter(reason="reclaim_warning").exists()
    waiting = ClusterRequest.objects.get(pk=need)
    assert waiting.queue_reason == "capacity"
    assert waiting.queue_message.startswith(
        "Preempts in 12 min, when bob-train's minimum run time ends"
    )
    # Then its 5 minutes of notice.
    assert waiting.queue_eta == ready_at + timedelta(seconds=1800 + 300)
