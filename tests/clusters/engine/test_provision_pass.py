"""What a request changes one row at a time (a deletion, a suspension, a job to write)
is marked on the row and converged by one coalesced pass, in batches: a burst of
deletes costs a bounded number of messages, not one per row, and a row's mark is its
outbox."""

from __future__ import annotations

from typing import Any

from clusters import tasks
from clusters.domain.states import State
from clusters.engine.reconciler import reconcile_once
from clusters.kube.gateway import get_gateway
from clusters.models import ClusterRequest, PendingPass
from clusters.queue.admission_pass import run_admission_pass
from clusters.rows import enqueue
from tests.clusters.conftest import Broker
from tests.clusters.engine.conftest import room_for_l4

CLUSTERS = "/api/v1/tenants/acme/clusters/"
JOBS = "/api/v1/tenants/acme/jobs/"


def _running(client: Any, count: int, prefix: str) -> list[ClusterRequest]:
    """``count`` clusters created through the API and applied (provisioning)."""
    for i in range(count):
        response = client.post(CLUSTERS, {"flavor": "l4", "name": f"{prefix}-{i}"}, format="json")
        assert response.status_code == 201, response.content
    admitted = run_admission_pass().admitted
    assert len(admitted) == count
    tasks.provision_clusters(admitted)
    return list(ClusterRequest.objects.unscoped().filter(pk__in=admitted).order_by("pk"))


def test_a_burst_of_deletes_sends_one_pass_and_no_message_per_row(
    broker: Broker, kubesim: Any, acme: Any, bob: Any, as_user: Any, l4: Any
) -> None:
    room_for_l4(acme, l4, 60)
    client = as_user(bob)
    rows = _running(client, 60, "burst")
    broker.drain()

    for row in rows:
        assert client.delete(f"{CLUSTERS}{row.name}/").status_code == 202

    assert broker.tasks(enqueue.PROVISION) == [], "no message per row"
    assert len(broker.tasks(enqueue.PROVISION_REQUESTED)) == 1, "one pass for the burst"
    marked = ClusterRequest.objects.unscoped().filter(provision_requested_at__isnull=False)
    assert marked.count() == 60 and {r.state for r in marked} == {State.DELETING}

    broker.drain()
    assert tasks.provision_requested() == tasks.PROVISION_PASS_BATCH
    # It took a batch and asked for the next pass at once for the rest.
    assert len(broker.tasks(enqueue.PROVISION_REQUESTED)) == 1
    assert tasks.provision_requested() == 60 - tasks.PROVISION_PASS_BATCH
    assert tasks.provision_requested() == 0
    assert not ClusterRequest.objects.unscoped().filter(provision_requested_at__isnull=False)
    gw = get_gateway()
    for row in rows:
        assert gw.get("ray.io/v1", "RayCluster", row.name, row.namespace) is None
    # The batches asked after no RayCluster or pod one by one: the reconcile pass they
    # asked for sees them gone in its LISTs and finishes every deletion in bulk.
    assert {r.state for r in ClusterRequest.objects.unscoped()} == {State.DELETING}
    assert enqueue.is_requested(enqueue.RECONCILE)
    assert len(reconcile_once().deleted) == 60
    assert {r.state for r in ClusterRequest.objects.unscoped()} == {State.DELETED}


def test_two_passes_at_once_take_different_rows(
    broker: Broker, kubesim: Any, acme: Any, bob: Any, as_user: Any, l4: Any
) -> None:
    from clusters.engine.provisioning import take_requested

    room_for_l4(acme, l4, 6)
    client = as_user(bob)
    rows = _running(client, 6, "pair")
    for row in rows:
        assert client.delete(f"{CLUSTERS}{row.name}/").status_code == 202
    first = take_requested(4)
    second = take_requested(4)
    assert len(first) == 4 and len(second) == 2
    assert sorted(first + second) == sorted(row.pk for row in rows)
    assert take_requested(4) == []


def test_a_lost_pass_message_is_sent_again_by_the_sweeper(
    broker: Broker, kubesim: Any, acme: Any, bob: Any, as_user: Any, l4: Any
) -> None:
    from datetime import timedelta

    from django.utils import timezone

    room_for_l4(acme, l4, 1)
    client = as_user(bob)
    (row,) = _running(client, 1, "lost")
    assert client.delete(f"{CLUSTERS}{row.name}/").status_code == 202
    broker.drain()  # the pass's message is lost; its claim and the row's mark stay
    PendingPass.objects.filter(name="provision").update(
        requested_at=timezone.now() - timedelta(hours=1)
    )
    tasks.sweep()
    (again,) = broker.tasks(enqueue.PROVISION_REQUESTED)
    assert again
    assert tasks.provision_requested() == 1
    reconcile_once()
    row.refresh_from_db()
    assert row.state == State.DELETED


def test_a_job_submission_and_its_stop_are_marked_for_the_pass(
    broker: Broker, kubesim: Any, acme: Any, bob: Any, as_user: Any
) -> None:
    client = as_user(bob)
    body = {"entrypoint": "python train.py", "flavor": "h100", "workers": 1, "name": "train"}
    assert client.post(JOBS, body, format="json").status_code == 201
    assert broker.tasks(enqueue.PROVISION) == []
    assert len(broker.tasks(enqueue.PROVISION_REQUESTED)) == 1
    assert tasks.provision_requested() == 1
    gw = get_gateway()
    job = ClusterRequest.objects.unscoped().get(name="train")
    rayjob = gw.get("ray.io/v1", "RayJob", job.name, job.namespace)
    assert rayjob is not None and rayjob["spec"]["suspend"] is True, "written while it waits"

    assert client.post(f"{JOBS}train/stop/").status_code == 200
    assert broker.tasks(enqueue.PROVISION) == []
    assert tasks.provision_requested() == 1
    gone = gw.get("ray.io/v1", "RayJob", job.name, job.namespace)
    assert gone is None or gone["metadata"].get("deletionTimestamp")


def test_a_stale_row_is_sent_again_once_per_stale_interval_not_at_every_sweep(
    broker: Broker, kubesim: Any, acme: Any, bob: Any, as_user: Any, l4: Any, settings: Any
) -> None:
    # A deleting row whose pass is slow to come (its message waits in a long queue) is
    # re-sent by the sweeper; the next sweeps must not send it again while that message
    # may still be on its way, or a queue that is behind grows without end (the
    # Kubernetes API suite saw 6,000 messages, 150 per row).
    from datetime import timedelta

    from django.utils import timezone

    room_for_l4(acme, l4, 1)
    client = as_user(bob)
    (row,) = _running(client, 1, "slow")
    assert client.delete(f"{CLUSTERS}{row.name}/").status_code == 202
    broker.drain()
    ClusterRequest.objects.filter(pk=row.pk).update(
        progress_at=timezone.now() - timedelta(seconds=settings.SWEEP_STALE_SECONDS + 1)
    )
    for _ in range(5):
        tasks.sweep()
    assert len(broker.tasks(enqueue.PROVISION)) == 1
    # Once the stale interval has passed again with no progress, it is sent once more.
    ClusterRequest.objects.filter(pk=row.pk).update(
        progress_at=timezone.now() - timedelta(seconds=settings.SWEEP_STALE_SECONDS + 1)
    )
    tasks.sweep()
    assert len(broker.tasks(enqueue.PROVISION)) == 2
    tasks.provision_cluster(row.pk)
    row.refresh_from_db()
    assert row.state == State.DELETED
