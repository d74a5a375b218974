"""Draining a member end to end, across three kubesim processes: a dev cluster there is
requeued and becomes ready on another member (its RayCluster gone from the drained one),
a job there runs to its end where it is, the owner is told of both, and the member ends
drained, with the time its moved request took to be placed again."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from clusters import tasks
from clusters.domain.states import State
from clusters.models import ClusterRequest, FlavorStock, KubeCluster
from clusters.queue.admission_pass import run_admission_pass
from kubesim.clock import ManualClock
from notifications import outbox
from notifications.models import Delivery
from tenants.models import Quota
from tests.clusters.engine.conftest import wait_for
from tests.clusters.engine.fleet_sims import fleet_of

pytestmark = pytest.mark.django_db(transaction=True)

TENANT = "/api/v1/tenants/acme/"
MEMBERS = "/api/v1/platform/kube-clusters/"
RAYCLUSTERS = "rayclusters.ray.io"
RAYJOBS = "rayjobs.ray.io"
RUN_SECONDS = 300  # on the drained member's manual clock: the job runs until the test says


@pytest.fixture(autouse=True)
def _quiet_broker(broker: Any) -> None:
    """Passes ask for more passes: those messages go to a queue nobody consumes."""


def _row(name: str) -> ClusterRequest:
    return ClusterRequest.objects.get(name=name)


def _engine_until(predicate: Any, what: str) -> Any:
    """Run the engine as its tasks would (reconcile, admission, provisioning) until
    ``predicate`` holds."""

    def once() -> Any:
        tasks.reconcile()
        admitted = run_admission_pass().admitted
        if admitted:
            tasks.provision_clusters(admitted)
        return predicate()

    return wait_for(once, timeout=60, what=what)


def test_a_drained_member_requeues_its_dev_cluster_waits_for_its_job_and_ends_drained(
    tmp_path: Path,
    settings: Any,
    acme: Any,
    bob: Any,
    root: Any,
    h100: Any,
    as_user: Any,
) -> None:
    acme.cpu_quota, acme.memory_quota_gib = 10_000, 100_000  # GPUs bind, nothing else
    acme.save()
    Quota.objects.filter(tenant=acme, flavor=h100).update(gpus=100)
    clock = ManualClock()
    with fleet_of(tmp_path, settings, "onprem", "cloud", "edge", clocks={"cloud": clock}) as fleet:
        for member in fleet.values():
            FlavorStock.objects.create(kube_cluster=member.row, flavor=h100, node_count=4)
        h100.node_count = 12
        h100.save()
        cloud = fleet["cloud"]
        cloud.sim.set_rayjob_defaults(run_seconds=RUN_SECONDS, pending_seconds=0)
        # onprem is cordoned while the two are placed, so that both land on cloud.
        KubeCluster.objects.filter(name="onprem").update(schedulable="cordoned")
        tasks.reconcile()
        api, admin = as_user(bob), as_user(root)
        dev = {"name": "dev", "flavor": "h100", "workers": 1}
        assert api.post(TENANT + "clusters/", dev, format="json").status_code == 201
        job = {"name": "train", "entrypoint": "python train.py", "flavor": "h100", "workers": 1}
        made = api.post(TENANT + "jobs/", job, format="json")
        assert made.status_code == 201, made.content
        _engine_until(
            lambda: _row("dev").state == State.READY and _row("train").state == State.RUNNING,
            "the dev cluster ready and the job running on cloud",
        )
        assert _row("dev").kube_cluster == _row("train").kube_cluster == cloud.row
        assert (acme.namespace, "dev") in cloud.objects(RAYCLUSTERS)
        assert admin.post(MEMBERS + "onprem/uncordon/").status_code == 200

        drained = admin.post(MEMBERS + "cloud/drain/", {}, format="json")
        assert drained.status_code == 200, drained.content
        progress = drained.json()["drain"]
        assert (progress["requeue"], progress["wait"], progress["drained"]) == (1, 1, False)

        # The dev cluster goes back to the queue and comes up on onprem; its RayCluster
        # leaves cloud. The job stays running on cloud.
        _engine_until(
            lambda: (
                _row("dev").state == State.READY and _row("dev").kube_cluster_id != cloud.row.pk
            ),
            "the dev cluster ready again",
        )
        moved = _row("dev")
        assert moved.kube_cluster == fleet["onprem"].row
        assert moved.events.filter(reason="member_drain", to_state=State.QUEUED).exists()
        assert (acme.namespace, "dev") in fleet["onprem"].objects(RAYCLUSTERS)
        wait_for(
            lambda: (acme.namespace, "dev") not in cloud.objects(RAYCLUSTERS),
            what="the dev cluster's RayCluster gone from cloud",
        )
        running = _row("train")
        assert running.state == State.RUNNING and running.kube_cluster == cloud.row
        assert (acme.namespace, "train") in cloud.objects(RAYJOBS)
        during = admin.get(MEMBERS + "cloud/").json()
        assert during["drain"]["wait"] == 1 and during["drain"]["requeue"] == 0
        assert during["drain"]["drained"] is False

        # The job runs to its end where it is; then nothing is left: drained.
        clock.advance(RUN_SECONDS + 1)
        _engine_until(lambda: _row("train").state == State.SUCCEEDED, "the job finished")
        assert _row("train").kube_cluster == cloud.row
        _engine_until(lambda: cloud.fresh().drained_at is not None, "cloud drained")
        after = admin.get(MEMBERS + "cloud/").json()
        assert after["drain"]["drained"] is True and after["drain"]["remaining"] == 0
        # Time to re-place: from the drain's start to the dev cluster's new admission.
        began = cloud.fresh().drain_started_at
        assert after["health"]["replace_seconds"] == pytest.approx(
            (moved.admitted_at - began).total_seconds()
        )
        browser = Client()
        browser.force_login(root)
        page = browser.get(f"/platform/kube-clusters/{cloud.row.name}/").content.decode()
        assert "Drained" in page and "nothing runs here any more" in page
        assert "Time to re-place" in page

        # Its owner was told of both, each saying what happens to it.
        outbox.dispatch_pass(now=timezone.now() + timedelta(hours=1))
        told = {
            d.payload["cluster"]: d.payload["text"]
            for d in Delivery.objects.filter(kind="member_drain")
        }
        assert set(told) == {"dev", "train"}
        assert "put back in the queue" in told["dev"]
        assert "runs to its end where it is" in told["train"]
