"""Crash safety, kubesim restarts, fault injection and concurrent requests.

All through the real loop: a Celery worker process, Redis, PostgreSQL and kubesim
over HTTP.
"""

from __future__ import annotations

import itertools
import random
import threading
import time
from collections import Counter
from decimal import Decimal
from typing import Any

import pytest
from django.db import connection
from rest_framework.test import APIClient

from clusters.kube.gateway import get_gateway
from clusters.models import ClusterRequest, UsageSpan
from clusters.queue.admission_pass import run_admission_pass
from clusters.requests import services
from clusters.rows.spec import ClusterSpec
from tenants.models import Quota
from tests.clusters.engine.conftest import engine_worker, wait_for
from tests.factories import MembershipFactory, UserFactory

MANAGED = "app.kubernetes.io/managed-by=gangway"

pytestmark = pytest.mark.slow


def _states(pks: list[int]) -> Counter[str]:
    return Counter(
        ClusterRequest.objects.unscoped().filter(pk__in=pks).values_list("state", flat=True)
    )


def _held_gpus() -> Decimal:
    rows = ClusterRequest.objects.unscoped().filter(holds_gpus=True)
    return sum((r.gpus for r in rows), Decimal(0))


def _roomy(tenant: Any, h100: Any, gpus: int) -> None:
    tenant.max_dev_clusters_per_user = 100
    tenant.max_dev_gpus_per_user = 100
    tenant.save()
    Quota.objects.filter(tenant=tenant, flavor=h100).update(gpus=gpus, borrow_limit=0)


def _request(alice: Any, acme: Any, h100: Any, name: str) -> ClusterRequest:
    return services.cluster_request_create(
        actor=alice, tenant=acme, spec=ClusterSpec(name=name, kind="dev", flavor=h100, workers=1)
    )


def _kill_at_random_points(worker: Any, rng: random.Random, pks: list[int], times: int) -> int:
    """SIGKILL and restart the worker ``times`` times; count kills that hit work in flight."""
    in_flight = 0
    for _ in range(times):
        # The worker takes about a second to boot; kill it somewhere after that.
        time.sleep(rng.uniform(0.8, 2.0))
        busy = _states(pks)
        if busy["admitted"] or busy["provisioning"] or busy["deleting"] or busy["queued"]:
            in_flight += 1
        worker.kill()
        worker.start()
    return in_flight


@pytest.fixture(params=["solo", "threads"])
def crashing_worker(
    request: pytest.FixtureRequest, transactional_db: Any, kubesim: Any, tmp_path: Any
) -> Any:
    """The tests' one-process worker (solo), and the worker as deploy/ runs it: two
    threads in one process, which share its informers, fold memo and gateway."""
    pool = request.param
    with engine_worker(tmp_path, pool=pool, concurrency=1 if pool == "solo" else 2) as handle:
        yield handle


def test_sigkill_worker_during_provisioning_and_deletion(
    crashing_worker: Any, kubesim: Any, alice: Any, acme: Any, h100: Any
) -> None:
    worker = crashing_worker
    rng = random.Random(20261122)
    _roomy(acme, h100, gpus=24)
    # Every Kubernetes call takes 100 ms, so that kills land in the middle of real work
    # (at 40 ms a faster engine, which moves a batch's rows together, had often
    # finished between kills).
    kubesim.set_faults(rate=1.0, codes=(), delay_ms=100)
    pks = [_request(alice, acme, h100, f"crash-{i}").pk for i in range(20)]
    hits = _kill_at_random_points(worker, rng, pks, 10)
    wait_for(lambda: _states(pks)["ready"] == 20, timeout=180, what="all 20 ready")
    gw = get_gateway()
    names = Counter(
        rc["metadata"]["name"] for rc in gw.list("ray.io/v1", "RayCluster", label_selector=MANAGED)
    )
    assert names == Counter({f"crash-{i}": 1 for i in range(20)})
    assert _held_gpus() == Decimal(20)

    for cluster in ClusterRequest.objects.unscoped().filter(pk__in=pks):
        services.cluster_delete(actor=alice, cluster=cluster)
    hits += _kill_at_random_points(worker, rng, pks, 10)
    wait_for(lambda: _states(pks)["deleted"] == 20, timeout=180, what="all 20 deleted")
    kubesim.clear_faults()
    assert hits >= 5, f"only {hits} of 20 kills interrupted work in flight"
    assert gw.list("ray.io/v1", "RayCluster", label_selector=MANAGED) == []
    assert gw.list("v1", "Pod", namespace="gw-acme") == []
    assert _held_gpus() == Decimal(0)
    spans = UsageSpan.objects.filter(cluster_id__in=pks)
    assert spans.count() == 20 and not spans.filter(ended_at__isnull=True).exists()


def test_kubesim_restart_without_state_recreates_live_clusters(
    worker: Any, kubesim: Any, alice: Any, acme: Any, h100: Any
) -> None:
    _roomy(acme, h100, gpus=16)
    pks = [_request(alice, acme, h100, f"keep-{i}").pk for i in range(3)]
    wait_for(lambda: _states(pks)["ready"] == 3, what="3 ready")
    kubesim.restart(keep_state=False)
    gw = get_gateway()
    assert gw.get("ray.io/v1", "RayCluster", "keep-0", "gw-acme") is None
    wait_for(
        lambda: all(gw.get("ray.io/v1", "RayCluster", f"keep-{i}", "gw-acme") for i in range(3)),
        what="RayClusters recreated",
    )
    wait_for(lambda: _states(pks)["ready"] == 3, what="ready again")
    assert gw.get("v1", "Namespace", "gw-acme") is not None


def test_fault_injection_all_requests_converge(
    worker: Any, kubesim: Any, alice: Any, acme: Any, h100: Any
) -> None:
    _roomy(acme, h100, gpus=16)
    kubesim.set_faults(rate=0.2, codes=(500, 503, 429, 409), delay_ms=50, retry_after=1)
    pks = [_request(alice, acme, h100, f"flaky-{i}").pk for i in range(6)]
    wait_for(lambda: _states(pks)["ready"] == 6, timeout=120, what="6 ready under faults")
    for cluster in ClusterRequest.objects.unscoped().filter(pk__in=pks):
        services.cluster_delete(actor=alice, cluster=cluster)
    wait_for(lambda: _states(pks)["deleted"] == 6, timeout=120, what="6 deleted under faults")
    kubesim.clear_faults()
    assert ClusterRequest.objects.unscoped().filter(state="failed").count() == 0


def test_fifty_concurrent_creates_never_admit_more_than_quota(
    transactional_db: Any, acme: Any, h100: Any
) -> None:
    _roomy(acme, h100, gpus=8)
    users = []
    for i in range(50):
        user = UserFactory(username=f"eng{i}")
        MembershipFactory(tenant=acme, user=user, role="engineer")
        users.append(user)
    barrier = threading.Barrier(50)
    errors: list[BaseException] = []
    observed: list[Decimal] = []

    def create(user: Any) -> None:
        try:
            api = APIClient()
            api.force_authenticate(user=user)
            barrier.wait()
            response = api.post(
                "/api/v1/tenants/acme/clusters/",
                {"name": f"race-{user.username}", "kind": "dev", "flavor": "h100", "workers": 1},
                format="json",
            )
            assert response.status_code == 201, response.content
            run_admission_pass()  # what the create's nudge runs, here in every thread at once
            observed.append(_held_gpus())
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=create, args=(u,)) for u in users]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert max(observed) <= 8
    run_admission_pass()
    assert _held_gpus() == Decimal(8)
    assert ClusterRequest.objects.unscoped().filter(state="queued").count() == 42


def test_permanent_errors_fail_at_once_without_retries(
    worker: Any, kubesim: Any, alice: Any, acme: Any, h100: Any
) -> None:
    _roomy(acme, h100, gpus=16)
    kubesim.set_faults(rate=1.0, codes=(422,), methods=["PATCH"])
    cluster = _request(alice, acme, h100, "refused")
    row = wait_for(
        lambda: ClusterRequest.objects.unscoped().filter(pk=cluster.pk, state="failed").first(),
        what="failed",
    )
    assert "422" in row.last_error
    time.sleep(3)  # several sweeper and reconciler periods
    assert kubesim.faults.stats()["faults"].get("422") == 1
    assert ClusterRequest.objects.unscoped().get(pk=cluster.pk).state == "failed"


def test_throttled_requests_wait_at_least_retry_after(
    worker: Any, kubesim: Any, alice: Any, acme: Any, h100: Any
) -> None:
    _roomy(acme, h100, gpus=16)
    kubesim.set_faults(rate=1.0, codes=(429,), methods=["PATCH"], retry_after=2)
    cluster = _request(alice, acme, h100, "throttled")
    seen: list[tuple[float, int]] = []
    # Watch until three retries have happened. The window is generous because a loaded
    # machine delays the worker; the assertion is on the spacing, never on how soon.
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and sum(1 for _, n in seen if n > 0) < 3:
        attempts = ClusterRequest.objects.unscoped().get(pk=cluster.pk).attempts
        if not seen or attempts != seen[-1][1]:
            seen.append((time.monotonic(), attempts))
        time.sleep(0.05)
    kubesim.clear_faults()
    retries = [t for t, n in seen if n > 0]
    assert len(retries) >= 3, seen
    gaps = [b - a for a, b in itertools.pairwise(retries)]
    assert min(gaps) >= 1.9, gaps
    wait_for(
        lambda: ClusterRequest.objects.unscoped().get(pk=cluster.pk).state == "ready",
        what="ready once throttling stops",
    )
