"""The dry-run's per-process cache (:mod:`clusters.queue.dry_run_cache`): a hit while nothing the
snapshot reads has changed, a fresh snapshot after any change to waiting requests, holds,
suspended clusters, tenants, quotas, the fleet, the settings or the time."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from clusters.domain.states import State
from clusters.models import ClusterRequest
from clusters.queue import dry_run_cache as recorded
from clusters.queue.admission_pass import run_admission_pass
from clusters.requests import services
from clusters.requests.dry_run import dry_run_verdict
from clusters.rows.spec import ClusterSpec
from tenants.models import GpuFlavor, Quota, Tenant

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _forget() -> Iterator[None]:
    recorded.forget()
    yield
    recorded.forget()


@pytest.fixture
def queue(acme: Any, bob: Any, h100: Any) -> list[ClusterRequest]:
    """Three of bob's requests: one admitted (holding GPUs), two waiting."""
    acme.max_dev_clusters_per_user = 10
    acme.max_dev_gpus_per_user = 50
    acme.save()
    Quota.objects.filter(tenant=acme, flavor=h100).update(gpus=4, borrow_limit=0)
    rows = [
        services.cluster_request_create(
            actor=bob, tenant=acme, spec=ClusterSpec(flavor=h100, name=f"r{i}", workers=4)
        )
        for i in range(3)
    ]
    run_admission_pass()
    return rows


def _changes_the_key(change: Callable[[], object]) -> None:
    _, before = recorded.recorded_snapshot()
    assert recorded.recorded_snapshot()[1] is before  # warm: the same recorded pass
    change()
    _, after = recorded.recorded_snapshot()
    assert after is not before


def test_a_warm_verdict_reuses_the_recorded_pass(
    queue: Any, acme: Any, bob: Any, h100: Any
) -> None:
    spec = ClusterSpec(flavor=h100, workers=1)
    cold = dry_run_verdict(tenant=acme, owner=bob, spec=spec)
    _, first = recorded.recorded_snapshot()
    warm = dry_run_verdict(tenant=acme, owner=bob, spec=spec)
    assert recorded.recorded_snapshot()[1] is first
    assert warm == cold
    assert cold["verdict"] == "will_queue" and cold["position"] == 3


def test_unrelated_rows_keep_the_entry(queue: Any, acme: Any, bob: Any, h100: Any) -> None:
    gone = services.cluster_request_create(
        actor=bob, tenant=acme, spec=ClusterSpec(flavor=h100, name="gone", workers=1)
    )
    ClusterRequest.objects.filter(pk=gone.pk).update(state=State.DELETED)
    _, before = recorded.recorded_snapshot()
    ClusterRequest.objects.filter(pk=gone.pk).update(state_reason="long gone")
    bob.email = "bob@example.org"
    bob.save()
    assert recorded.recorded_snapshot()[1] is before


def test_a_new_waiting_request(queue: Any, acme: Any, bob: Any, h100: Any) -> None:
    _changes_the_key(
        lambda: services.cluster_request_create(
            actor=bob, tenant=acme, spec=ClusterSpec(flavor=h100, name="another", workers=1)
        )
    )


def test_a_waiting_request_changed(queue: Any) -> None:
    waiting = queue[2]
    _changes_the_key(lambda: ClusterRequest.objects.filter(pk=waiting.pk).update(priority=5))


def test_a_waiting_request_gone(queue: Any) -> None:
    waiting = queue[2]
    _changes_the_key(
        lambda: ClusterRequest.objects.filter(pk=waiting.pk).update(state=State.DELETED)
    )


def test_a_hold_released(queue: Any) -> None:
    holder = ClusterRequest.objects.get(holds_gpus=True)
    _changes_the_key(
        lambda: ClusterRequest.objects.filter(pk=holder.pk).update(
            holds_gpus=False, state=State.DELETED
        )
    )


def test_a_hold_changed(queue: Any) -> None:
    holder = ClusterRequest.objects.get(holds_gpus=True)
    _changes_the_key(
        lambda: ClusterRequest.objects.filter(pk=holder.pk).update(
            expires_at=timezone.now() + timedelta(hours=9)
        )
    )


def test_a_suspended_cluster(queue: Any) -> None:
    holder = ClusterRequest.objects.get(holds_gpus=True)
    _changes_the_key(
        lambda: ClusterRequest.objects.filter(pk=holder.pk).update(
            holds_gpus=False, state=State.SUSPENDED
        )
    )


def test_a_quota(queue: Any, acme: Any, h100: Any) -> None:
    _changes_the_key(lambda: Quota.objects.filter(tenant=acme, flavor=h100).update(borrow_limit=4))


def test_a_tenant_policy(queue: Any, acme: Any) -> None:
    _changes_the_key(
        lambda: Tenant.objects.unscoped().filter(pk=acme.pk).update(max_dev_gpus_per_user=7)
    )


def test_the_fleet(queue: Any, h100: Any) -> None:
    _changes_the_key(lambda: GpuFlavor.objects.filter(pk=h100.pk).update(node_count=9))


def test_observed_capacity(queue: Any, h100: Any) -> None:
    _changes_the_key(
        lambda: GpuFlavor.objects.filter(pk=h100.pk).update(
            observed_free_gpus=3, observed_at=timezone.now()
        )
    )


def test_the_settings(queue: Any, settings: Any) -> None:
    def change() -> None:
        settings.ADMISSION_AGING_SECONDS = settings.ADMISSION_AGING_SECONDS + 1

    _changes_the_key(change)


def test_time(queue: Any, monkeypatch: Any) -> None:
    later = timezone.now() + recorded.KEEP_FOR + timedelta(seconds=30)
    _changes_the_key(lambda: monkeypatch.setattr(timezone, "now", lambda: later))


def test_a_clock_set_back(queue: Any, monkeypatch: Any) -> None:
    earlier = timezone.now() - timedelta(minutes=1)
    _changes_the_key(lambda: monkeypatch.setattr(timezone, "now", lambda: earlier))


def test_an_entry_ends_when_a_request_ages(queue: Any, settings: Any, monkeypatch: Any) -> None:
    settings.ADMISSION_AGING_SECONDS = 3600
    monkeypatch.setattr(recorded, "KEEP_FOR", timedelta(minutes=5))
    waiting = queue[2]
    ClusterRequest.objects.filter(pk=waiting.pk).update(
        created_at=timezone.now() - timedelta(seconds=3590)
    )
    recorded.recorded_snapshot()
    entry = recorded._entry
    assert entry is not None
    aged_at = ClusterRequest.objects.get(pk=waiting.pk).created_at + timedelta(seconds=3600)
    assert entry.until == aged_at


def _wait_for(predicate: Callable[[], object], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_a_slow_queue_answers_from_the_last_reading_while_the_next_is_read(
    transactional_db: Any,
    queue: Any,
    acme: Any,
    bob: Any,
    h100: Any,
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Every reading counts as slow here (a large queue takes a second to read).
    monkeypatch.setattr(recorded, "SLOW_BUILD", 0.0)
    settings.DRY_RUN_STALE_SECONDS = 60
    snapshot, first = recorded.recorded_snapshot()
    spec = ClusterSpec(flavor=h100, workers=1)
    before = dry_run_verdict(tenant=acme, owner=bob, spec=spec)
    assert before["position"] == 3 and before["as_of"] == snapshot.now
    services.cluster_request_create(
        actor=bob, tenant=acme, spec=ClusterSpec(flavor=h100, name="ahead", workers=1)
    )
    # Answered at once from the last reading, which says when it read the queue ...
    stale = dry_run_verdict(tenant=acme, owner=bob, spec=spec)
    assert stale["position"] == 3 and stale["as_of"] == snapshot.now
    # ... while the next reading is made in the background, and then answers.
    _wait_for(lambda: recorded.recorded_snapshot()[1] is not first)
    _wait_for(lambda: not recorded._refreshing)
    fresh = dry_run_verdict(tenant=acme, owner=bob, spec=spec)
    assert fresh["position"] == 4 and fresh["as_of"] > snapshot.now


def test_a_stale_reading_is_not_answered_past_its_limit_or_when_turned_off(
    queue: Any, acme: Any, bob: Any, h100: Any, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(recorded, "SLOW_BUILD", 0.0)
    settings.DRY_RUN_STALE_SECONDS = 0
    _changes_the_key(lambda: ClusterRequest.objects.filter(pk=queue[2].pk).update(priority=5))
    assert not recorded._refreshing
    # Too old to answer: read afresh, at once.
    settings.DRY_RUN_STALE_SECONDS = 60
    snapshot, before = recorded.recorded_snapshot()
    ClusterRequest.objects.filter(pk=queue[2].pk).update(priority=6)
    later = snapshot.now + timedelta(seconds=61)
    monkeypatch.setattr(timezone, "now", lambda: later)
    assert recorded.recorded_snapshot()[1] is not before
    assert not recorded._refreshing
