"""Kueue mode with MultiKueue, across three kubesim processes: the home member is Kueue's
manager, the two others its workers. gangway writes the MultiKueue objects on the
manager, the workers' queues and the tenant's namespace on the workers; Kueue dispatches
each request's Workload to the first worker that admits it, and the row follows it there.
The passes and provisioning run in the test's process (no Celery worker), MultiKueue in
the kubesims' own threads."""

from __future__ import annotations

import base64
import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from clusters import tasks
from clusters.domain.states import State
from clusters.members import services as members
from clusters.models import ClusterEvent, ClusterRequest, FlavorStock, Schedulable
from clusters.requests import services
from clusters.rows.spec import ClusterSpec
from tenants.models import Quota
from tests.clusters.engine.conftest import wait_for
from tests.clusters.engine.fleet_sims import Member, fleet_of

pytestmark = pytest.mark.django_db(transaction=True)

RAYCLUSTERS = "rayclusters.ray.io"
CONFIGS = "multikueueconfigs.kueue.x-k8s.io"
MK_CLUSTERS = "multikueueclusters.kueue.x-k8s.io"
CHECKS = "admissionchecks.kueue.x-k8s.io"
QUEUES = "clusterqueues.kueue.x-k8s.io"
CHECK = "gangway-multikueue-gw-acme"
JOBS = "/api/v1/tenants/acme/jobs/"


@pytest.fixture(autouse=True)
def _quiet_broker(broker: Any) -> None:
    """Nudges go to a queue nobody consumes: the test runs the passes itself."""


def _row(pk: int) -> ClusterRequest:
    return ClusterRequest.objects.unscoped().get(pk=pk)


def _settle(
    pk: int, state: str, what: str, fleet: dict[str, Member] | None = None
) -> ClusterRequest:
    """Run the fleet's passes until the row is in ``state`` (a timeout says where the
    row's Workloads and RayClusters stand on each member of ``fleet``)."""

    def moved() -> ClusterRequest | None:
        tasks.reconcile()
        row = _row(pk)
        return row if row.state == state else None

    def said() -> str:
        row = _row(pk)
        where = f" on {row.kube_cluster}" if row.kube_cluster_id else ""
        found = f"{what} (it is {row.state}{where}: {row.state_reason}; {row.last_error})"
        return found + "".join(m.said(row) for m in (fleet or {}).values())

    # Generous: three simulators and the passes share two cores with the rest of CI.
    found: ClusterRequest = wait_for(moved, timeout=240, what=said)
    return found


def _request(alice: Any, acme: Any, h100: Any, name: str) -> int:
    """A one-node prod cluster (8 H100), written to the manager as provisioning does."""
    row = services.cluster_request_create(
        actor=alice, tenant=acme, spec=ClusterSpec(name=name, kind="prod", flavor=h100, workers=1)
    )
    tasks.provision_requested()
    return int(row.pk)


def _config(hub: Member, check: str = CHECK) -> list[str] | None:
    found = hub.sim.get(CONFIGS, "", check)
    return None if found is None else list(found["spec"]["clusters"])


def _active(hub: Member, name: str) -> bool:
    found = hub.sim.get(MK_CLUSTERS, "", name) or {}
    conditions = (found.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Active" and c["status"] == "True" for c in conditions)


def test_multikueue_dispatches_in_placement_order_and_the_row_follows(
    tmp_path: Path, settings: Any, root: Any, alice: Any, acme: Any, globex: Any, h100: Any
) -> None:
    Quota.objects.filter(tenant=acme, flavor=h100).update(gpus=64, borrow_limit=0)
    acme.cpu_quota, acme.memory_quota_gib = 10_000, 100_000
    acme.save()
    with fleet_of(tmp_path, settings, "hub", "w1", "w2", kueue=True) as fleet:
        hub, w1, w2 = fleet["hub"], fleet["w1"], fleet["w2"]
        # w1 has one H100 node for gangway, w2 four: a worker's queues hold what it has.
        FlavorStock.objects.create(kube_cluster=w1.row, flavor=h100, node_count=1)
        FlavorStock.objects.create(kube_cluster=w2.row, flavor=h100, node_count=4)
        w2.row.allowed_tenants.add(acme)  # globex may use w1 only
        tasks.reconcile()

        # The manager: a Secret and a MultiKueueCluster per worker, the tenant's config in
        # placement order, its check, and its ClusterQueue running the check.
        assert _config(hub) == ["w1", "w2"]
        check = hub.sim.get(CHECKS, "", CHECK)
        assert check["spec"]["controllerName"] == "kueue.x-k8s.io/multikueue"
        assert check["spec"]["parameters"]["name"] == CHECK
        queue = hub.sim.get(QUEUES, "", "gw-acme")
        assert queue["spec"]["admissionChecksStrategy"] == {"admissionChecks": [{"name": CHECK}]}
        for member in (w1, w2):
            mkc = hub.sim.get(MK_CLUSTERS, "", member.row.name)
            location = mkc["spec"]["clusterSource"]["kubeConfig"]["location"]
            secret = hub.sim.get("secrets", "kueue-system", location)
            kubeconfig = json.loads(base64.b64decode(secret["data"]["kubeconfig"]))
            server = kubeconfig["clusters"][0]["cluster"]["server"]
            assert server == member.sim.url
            with urllib.request.urlopen(server + "/version") as answer:  # it reaches the worker
                assert answer.status == 200
            wait_for(lambda m=member: _active(hub, m.row.name), what="MultiKueue connected")
        # The workers: the tenant's namespace and LocalQueue (MultiKueue makes neither),
        # and queues sized to what each has, without the dispatch check.
        for member, gpus in ((w1, "8"), (w2, "32")):
            assert "gw-acme" in member.namespaces()
            assert member.sim.get("localqueues.kueue.x-k8s.io", "gw-acme", "gangway")
            worker_queue = member.sim.get(QUEUES, "", "gw-acme")
            assert "admissionChecksStrategy" not in worker_queue["spec"]
            (h100_entry,) = [
                f
                for f in worker_queue["spec"]["resourceGroups"][0]["flavors"]
                if f["name"] == "h100"
            ]
            assert h100_entry["resources"][2]["borrowingLimit"] == gpus
            pool = member.sim.get("cohorts.kueue.x-k8s.io", "", "gangway-worker-capacity")
            (h100_pool,) = [
                f for f in pool["spec"]["resourceGroups"][0]["flavors"] if f["name"] == "h100"
            ]
            assert h100_pool["resources"][2]["nominalQuota"] == gpus
        assert hub.sim.get(MK_CLUSTERS, "", "hub") is None  # the manager runs nothing
        # An allow-list: globex's config lists w1 only, and w2 never gets its namespace.
        assert _config(hub, "gangway-multikueue-gw-globex") == ["w1"]
        assert "gw-globex" in w1.namespaces() and "gw-globex" not in w2.namespaces()
        assert w2.sim.get(QUEUES, "", "gw-globex") is None

        # The first request goes to w1, the first worker in order with room.
        first = _request(alice, acme, h100, "first")
        row = _settle(first, State.READY, "first ready on a worker", fleet)
        assert row.kube_cluster == w1.row
        assert (acme.namespace, "first") in w1.objects(RAYCLUSTERS)
        assert (acme.namespace, "first") not in w2.objects(RAYCLUSTERS)
        # The manager keeps the original (MultiKueue syncs its status), and no pods.
        assert (acme.namespace, "first") in hub.objects(RAYCLUSTERS)
        assert not hub.sim.list("pods", acme.namespace)
        assert ClusterEvent.objects.filter(
            cluster_id=first, message__contains="dispatched by MultiKueue to w1"
        ).exists()

        # w1 is full: the next one goes to w2.
        second = _request(alice, acme, h100, "second")
        row = _settle(second, State.READY, "second ready on the next worker", fleet)
        assert row.kube_cluster == w2.row
        assert (acme.namespace, "second") in w2.objects(RAYCLUSTERS)
        assert (acme.namespace, "second") not in w1.objects(RAYCLUSTERS)

        # Deleting the first clears it from the manager and from w1.
        services.cluster_delete(actor=alice, cluster=_row(first))
        tasks.provision_requested()
        _settle(first, State.DELETED, "first deleted")
        wait_for(
            lambda: (
                (acme.namespace, "first") not in hub.objects(RAYCLUSTERS)
                and (acme.namespace, "first") not in w1.objects(RAYCLUSTERS)
            ),
            what="the original and the copy gone",
        )

        # Cordoned, w1 leaves the config: the next request goes to w2 though w1 has room.
        members.kube_cluster_set_schedulable(
            actor=root, member=w1.row, schedulable=Schedulable.CORDONED
        )
        tasks.reconcile()
        assert _config(hub) == ["w2"]
        assert hub.sim.get(MK_CLUSTERS, "", "w1") is not None  # kept: its Secret too
        third = _request(alice, acme, h100, "third")
        row = _settle(third, State.READY, "third ready on w2", fleet)
        assert row.kube_cluster == w2.row
        assert (acme.namespace, "third") not in w1.objects(RAYCLUSTERS)


def test_tenants_together_never_pass_what_a_worker_has(
    tmp_path: Path, settings: Any, alice: Any, root: Any, acme: Any, globex: Any, h100: Any
) -> None:
    """w1 has one H100 node. Each tenant's quota alone would fit there, but once acme's
    gang holds it, globex's goes to w2: the worker's Cohort holds what w1 has, and every
    tenant's queue there borrows from it."""
    for tenant in (acme, globex):
        Quota.objects.filter(tenant=tenant, flavor=h100).update(gpus=64, borrow_limit=0)
        tenant.cpu_quota, tenant.memory_quota_gib = 10_000, 100_000
        tenant.save()
    with fleet_of(tmp_path, settings, "hub", "w1", "w2", kueue=True) as fleet:
        hub, w1, w2 = fleet["hub"], fleet["w1"], fleet["w2"]
        FlavorStock.objects.create(kube_cluster=w1.row, flavor=h100, node_count=1)
        FlavorStock.objects.create(kube_cluster=w2.row, flavor=h100, node_count=4)
        tasks.reconcile()
        wait_for(lambda: _active(hub, "w1") and _active(hub, "w2"), what="workers connected")
        first = _request(alice, acme, h100, "acme-gang")
        assert _settle(first, State.READY, "acme's gang ready", fleet).kube_cluster == w1.row
        second = _request(root, globex, h100, "globex-gang")
        row = _settle(second, State.READY, "globex's gang ready on the worker with room", fleet)
        assert row.kube_cluster == w2.row
        assert (globex.namespace, "globex-gang") not in w1.objects(RAYCLUSTERS)


def test_a_job_dispatched_by_multikueue_runs_and_ends_on_its_worker(
    tmp_path: Path, settings: Any, bob: Any, acme: Any, h100: Any, as_user: Any
) -> None:
    """A RayJob runs on the first worker; MultiKueue deletes its copy once it finished,
    and the row ends from the status MultiKueue copied back onto the manager's original
    (or from the copy, whichever the pass saw), its GPUs given back."""
    with fleet_of(tmp_path, settings, "hub", "w1", "w2", kueue=True) as fleet:
        for name in ("w1", "w2"):
            FlavorStock.objects.create(kube_cluster=fleet[name].row, flavor=h100, node_count=4)
            fleet[name].sim.set_rayjob_defaults(run_seconds=2, pending_seconds=0)
        tasks.reconcile()
        body = {"name": "kjob", "entrypoint": "python train.py", "flavor": "h100", "workers": 1}
        assert as_user(bob).post(JOBS, body, format="json").status_code == 201
        tasks.provision_requested()
        pk = ClusterRequest.objects.unscoped().get(name="kjob").pk
        row = _settle(pk, State.SUCCEEDED, "the job succeeded on a worker")
        assert row.kube_cluster == fleet["w1"].row

        def released() -> bool:
            tasks.reconcile()
            return not _row(pk).holds_gpus

        wait_for(released, what="its GPUs given back once its pods are gone")
        assert ClusterEvent.objects.filter(
            cluster_id=pk, message__contains="dispatched by MultiKueue to w1"
        ).exists()
        assert not fleet["hub"].sim.list("pods", acme.namespace)  # it ran on w1 only
        assert not fleet["w2"].sim.list("rayjobs.ray.io", acme.namespace)


def test_a_drained_worker_sends_its_cluster_to_the_next_worker_and_ends_drained(
    tmp_path: Path, settings: Any, root: Any, alice: Any, acme: Any, h100: Any, as_user: Any
) -> None:
    """A drain in MultiKueue mode: the worker leaves the tenant's config, its running
    cluster goes back through Kueue and MultiKueue to the next worker with room, its
    copy leaves the drained worker, and the member ends drained."""
    Quota.objects.filter(tenant=acme, flavor=h100).update(gpus=64, borrow_limit=0)
    acme.cpu_quota, acme.memory_quota_gib = 10_000, 100_000
    acme.save()
    with fleet_of(tmp_path, settings, "hub", "w1", "w2", kueue=True) as fleet:
        hub, w1, w2 = fleet["hub"], fleet["w1"], fleet["w2"]
        for member in (w1, w2):
            FlavorStock.objects.create(kube_cluster=member.row, flavor=h100, node_count=2)
        tasks.reconcile()
        wait_for(lambda: _active(hub, "w1") and _active(hub, "w2"), what="workers connected")
        pk = _request(alice, acme, h100, "moving")
        assert _settle(pk, State.READY, "ready on the first worker", fleet).kube_cluster == w1.row

        drained = as_user(root).post("/api/v1/platform/kube-clusters/w1/drain/", {}, format="json")
        assert drained.status_code == 200, drained.content

        def on_w2() -> ClusterRequest | None:
            tasks.reconcile()
            tasks.provision_requested()
            row = _row(pk)
            return row if row.state == State.READY and row.kube_cluster == w2.row else None

        wait_for(on_w2, timeout=240, what=lambda: f"moved to w2 (it is {_row(pk).state})")
        assert _config(hub) == ["w2"]
        wait_for(
            lambda: (acme.namespace, "moving") not in w1.objects(RAYCLUSTERS),
            what="the copy gone from the drained worker",
        )
        assert (acme.namespace, "moving") in w2.objects(RAYCLUSTERS)

        def drained_now() -> bool:
            tasks.reconcile()
            return w1.fresh().drained_at is not None

        wait_for(drained_now, timeout=120, what="w1 drained")
        after = as_user(root).get("/api/v1/platform/kube-clusters/w1/").json()
        assert after["drain"]["drained"] is True and after["drain"]["remaining"] == 0
