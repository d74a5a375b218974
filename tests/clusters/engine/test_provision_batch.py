"""What one admission pass admits is provisioned in batches, not one message per row.

A batch reads its rows once and ensures each tenant's bundle once; a row it cannot
finish goes to the single-row task, which owns retries and backoff.
"""

from __future__ import annotations

from typing import Any

from django.db import connection
from django.test.utils import CaptureQueriesContext

from clusters import tasks
from clusters.domain.states import State
from clusters.kube.gateway import get_gateway
from clusters.models import ClusterRequest
from clusters.queue.admission_pass import run_admission_pass
from clusters.rows import enqueue
from tests.clusters.conftest import Broker
from tests.clusters.engine.conftest import room_for_l4

CREATE = "/api/v1/tenants/{slug}/clusters/"


def _roomy(*tenants: Any) -> None:
    for tenant in tenants:
        tenant.max_dev_clusters_per_user = 100
        tenant.max_dev_gpus_per_user = 100
        tenant.save()


def _queue(client: Any, slug: str, count: int, prefix: str) -> None:
    for i in range(count):
        response = client.post(
            CREATE.format(slug=slug), {"flavor": "l4", "name": f"{prefix}-{i}"}, format="json"
        )
        assert response.status_code == 201, response.content


def test_an_admission_pass_sends_provisioning_in_batches(
    broker: Broker, acme: Any, bob: Any, as_user: Any, l4: Any
) -> None:
    room_for_l4(acme, l4, 60)
    _queue(as_user(bob), "acme", 60, "batch")

    admitted = tasks.admission_pass()

    assert len(admitted) == 60
    batches = broker.tasks(enqueue.PROVISION_MANY)
    assert len(batches) == 3, "60 rows in batches of 25: three messages"
    assert sorted(pk for m in batches for pk in m_args(m)[0]) == sorted(admitted)
    assert not broker.tasks(enqueue.PROVISION), "no message per row"


def m_args(message: dict[str, Any]) -> list[Any]:
    """The positional arguments of a Celery protocol-2 message (body: [args, kwargs, ...])."""
    import base64
    import json

    body = json.loads(base64.b64decode(message["body"]))
    return list(body[0])


def test_a_batch_applies_every_row_and_each_bundle_once(
    broker: Broker, kubesim: Any, acme: Any, globex: Any, bob: Any, charlie: Any, as_user: Any
) -> None:
    _roomy(acme, globex)
    _queue(as_user(bob), "acme", 2, "a")  # acme holds at most 2 L4s
    _queue(as_user(charlie), "globex", 2, "g")
    admitted = run_admission_pass().admitted
    assert len(admitted) == 4
    kubesim.faults.reset_stats()

    with CaptureQueriesContext(connection) as queries:
        tasks.provision_clusters(admitted)

    # One namespace check per tenant (the claim before its bundle), not one per cluster.
    assert kubesim.faults.stats()["requests"].get("GET", 0) == 2
    # The bundles' quota rows: one query for the batch's tenants, not one per tenant.
    assert len([q for q in queries if '"tenants_quota"' in q["sql"]]) == 1
    rows = ClusterRequest.objects.unscoped().filter(pk__in=admitted)
    assert {r.state for r in rows} == {State.PROVISIONING}
    gw = get_gateway()
    for row in rows:
        assert gw.get("ray.io/v1", "RayCluster", row.name, row.namespace) is not None
    assert not broker.tasks(enqueue.PROVISION)


def test_a_row_the_batch_cannot_apply_goes_to_its_own_task(
    broker: Broker, kubesim: Any, acme: Any, bob: Any, as_user: Any
) -> None:
    _roomy(acme)
    _queue(as_user(bob), "acme", 2, "f")
    admitted = run_admission_pass().admitted
    kubesim.set_faults(rate=1.0, codes=(503,), methods=("PATCH", "POST"))
    try:
        tasks.provision_clusters(admitted)
    finally:
        kubesim.clear_faults()

    rows = ClusterRequest.objects.unscoped().filter(pk__in=admitted)
    assert {r.state for r in rows} == {State.ADMITTED}, "nothing half-done is recorded"
    resent = sorted(m_args(m)[0] for m in broker.tasks(enqueue.PROVISION))
    assert resent == sorted(admitted), "each row now retries on its own, with backoff"


def test_a_row_refused_by_the_api_fails_at_once(
    broker: Broker, kubesim: Any, acme: Any, bob: Any, as_user: Any
) -> None:
    _roomy(acme)
    _queue(as_user(bob), "acme", 1, "refused")
    admitted = run_admission_pass().admitted
    tasks.provision_clusters(admitted)  # the tenant's bundle is applied and remembered
    ClusterRequest.objects.unscoped().filter(pk__in=admitted).update(state=State.ADMITTED)
    kubesim.set_faults(rate=1.0, codes=(422,), methods=("PATCH",))
    try:
        tasks.provision_clusters(admitted)
    finally:
        kubesim.clear_faults()

    (row,) = ClusterRequest.objects.unscoped().filter(pk__in=admitted)
    assert row.state == State.FAILED and "422" in row.last_error
    assert kubesim.faults.stats()["faults"].get("422") == 1, "tried once, not retried"
    assert not broker.tasks(enqueue.PROVISION)


def _batches(submit: Any, moved_to: str) -> tuple[list[int], list[int]]:
    """For 1 (the first ensures the tenant's bundle), 2 and 12 requests queued by
    ``submit(size)``: admit them, provision them as one batch and check that every row
    moved to ``moved_to`` with its ``applied`` event. Returns each batch's query count
    and every row admitted."""
    from clusters.models import ClusterEvent

    counts: list[int] = []
    every: list[int] = []
    for size in (1, 2, 12):
        submit(size)
        admitted = run_admission_pass().admitted
        assert len(admitted) == size
        with CaptureQueriesContext(connection) as queries:
            tasks.provision_clusters(admitted)
        counts.append(len(queries))
        rows = ClusterRequest.objects.unscoped().filter(pk__in=admitted)
        assert {r.state for r in rows} == {moved_to}
        applied = ClusterEvent.objects.filter(cluster__in=admitted, reason="applied")
        assert sorted(applied.values_list("cluster_id", flat=True)) == sorted(admitted)
        every += admitted
    return counts, every


def test_a_batch_moves_its_rows_in_a_constant_number_of_queries(
    broker: Broker, kubesim: Any, acme: Any, bob: Any, as_user: Any, l4: Any
) -> None:
    room_for_l4(acme, l4, 20)
    client = as_user(bob)
    counts, _ = _batches(lambda size: _queue(client, "acme", size, f"q{size}"), State.PROVISIONING)
    assert counts[1] == counts[2], counts


def test_the_last_batch_of_a_burst_asks_for_its_reconcile_pass_at_once(
    broker: Broker, kubesim: Any, acme: Any, bob: Any, as_user: Any, l4: Any
) -> None:
    """While an admission pass is asked for (a burst goes on), a batch's reconcile nudge
    waits so that the burst's batches share one pass; a batch that finishes while
    another's rows are still admitted leaves the nudge to the last one, which asks for
    the pass at once, as nothing would share the wait."""
    from clusters.models import PendingPass
    from tenants.models import Quota

    _roomy(acme)
    Quota.objects.filter(tenant=acme, flavor=l4).update(gpus=3, borrow_limit=0)
    _queue(as_user(bob), "acme", 3, "b")
    first, second, third = run_admission_pass().admitted

    # The creates asked for an admission pass, and run_admission_pass (not the task)
    # left that claim: as if more requests had come meanwhile.
    assert enqueue.is_requested(enqueue.ADMISSION_PASS)
    tasks.provision_clusters([first])
    (delayed,) = broker.tasks(enqueue.RECONCILE)
    assert delayed["headers"]["eta"], "a burst goes on: the pass waits for its batches"

    broker.drain()
    enqueue.pass_started(enqueue.RECONCILE)  # that pass ran
    PendingPass.objects.filter(name="admission").update(requested_at=None)  # so did that
    tasks.provision_clusters([second])  # the third row's batch is still at work
    assert broker.tasks(enqueue.RECONCILE) == [], "the last batch asks, not this one"

    tasks.provision_clusters([third])
    (at_once,) = broker.tasks(enqueue.RECONCILE)
    assert at_once["headers"]["eta"] is None, "the end of the burst: the pass starts now"
    rows = ClusterRequest.objects.unscoped().filter(pk__in=[first, second, third])
    assert {row.state for row in rows} == {State.PROVISIONING}


def test_a_batch_starts_its_admitted_jobs_in_a_constant_number_of_queries(
    broker: Broker, kubesim: Any, acme: Any, bob: Any, as_user: Any, l4: Any
) -> None:
    room_for_l4(acme, l4, 20)
    client = as_user(bob)

    def submit(size: int) -> None:
        for i in range(size):
            body = {"entrypoint": "python t.py", "flavor": "l4", "name": f"job{size}-{i}"}
            assert client.post("/api/v1/tenants/acme/jobs/", body, format="json").status_code == 201

    counts, admitted = _batches(submit, State.STARTING)
    gw = get_gateway()
    for row in ClusterRequest.objects.unscoped().filter(pk__in=admitted).select_related("tenant"):
        rayjob = gw.get("ray.io/v1", "RayJob", row.name, row.namespace)
        assert rayjob is not None and not rayjob["spec"].get("suspend")
    assert counts[1] == counts[2], counts
