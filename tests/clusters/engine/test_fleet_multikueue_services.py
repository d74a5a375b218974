"""Ray Serve services in MultiKueue mode, across three kubesim processes (the home member
Kueue's manager, the two others its workers). As a cluster or a job, a service's
RayService is written on the manager in the tenant's LocalQueue; Kueue v0.19.2's RayService
adapter dispatches it to the first worker that admits it, the row follows it there, the
worker's pass reads the copy (status, pods, the Serve endpoint) and writes go to the
manager's original; a new Serve config reaches the copy through MultiKueue, a new image is
refused (MultiKueue forwards only the Serve config). The passes and provisioning run in
the test's process (no Celery worker), Kueue and MultiKueue in the kubesims'."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from knox.models import AuthToken

from clusters import tasks
from clusters.domain.states import State
from clusters.models import ClusterEvent, ClusterRequest, FlavorStock
from tenants.models import Quota
from tests.clusters.engine.conftest import wait_for
from tests.clusters.engine.fleet_sims import Member, fleet_of
from tests.clusters.kinds.rayservice.samples import STABLE_DIFFUSION

pytestmark = pytest.mark.django_db(transaction=True)

SERVICES = "/api/v1/tenants/acme/services/"
RAYSERVICES = "rayservices.ray.io"
RAYCLUSTERS = "rayclusters.ray.io"
MK_CLUSTERS = "multikueueclusters.kueue.x-k8s.io"
# Generous: three simulators and the passes share two cores with the rest of CI.
WAIT = 240
# The same applications, the ingress with two replicas.
NEW_CONFIG = STABLE_DIFFUSION.replace("num_replicas: 1", "num_replicas: 2", 1)
OTHER_IMAGE = "rayproject/ray:2.40.0-py310-gpu"


@pytest.fixture(autouse=True)
def _quiet_broker(broker: Any) -> None:
    """Nudges go to a queue nobody consumes: the test runs the passes itself."""


def _row(pk: int) -> ClusterRequest:
    return ClusterRequest.objects.unscoped().get(pk=pk)


def _passes() -> None:
    """The fleet's passes as Celery would run them: reconcile, then the provision pass."""
    tasks.reconcile()
    tasks.provision_requested()


def _settle(
    pk: int,
    state: str,
    what: str,
    member: Member | None = None,
    fleet: dict[str, Member] | None = None,
) -> ClusterRequest:
    """Run the passes until the row is in ``state`` (on ``member``, if given; a timeout
    says where the row stands on each member of ``fleet``)."""

    def moved() -> ClusterRequest | None:
        _passes()
        row = _row(pk)
        there = member is None or row.kube_cluster_id == member.row.pk
        return row if row.state == state and there else None

    def said() -> str:
        row = _row(pk)
        return (
            f"{what} (it is {row.state} on {row.kube_cluster}: {row.state_reason}; "
            f"{row.queue_message}; {row.last_error})"
        ) + "".join(m.said(row) for m in (fleet or {}).values())

    found: ClusterRequest = wait_for(moved, timeout=WAIT, what=said)
    return found


def _service(api: Any, name: str) -> int:
    """A one-node prod service (8 H100) through the API, written to the manager."""
    body = {
        "name": name,
        "kind": "prod",
        "flavor": "h100",
        "workers": 1,
        "serve_config": STABLE_DIFFUSION,
    }
    answer = api.post(SERVICES, body, format="json")
    assert answer.status_code == 201, answer.content
    _passes()  # the manager's pass writes a queued service's RayService (Kueue holds it)
    return int(ClusterRequest.objects.unscoped().get(name=name).pk)


def _active(hub: Member, name: str) -> bool:
    found = hub.sim.get(MK_CLUSTERS, "", name) or {}
    conditions = (found.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Active" and c["status"] == "True" for c in conditions)


def _roomy(tenant: Any, flavor: Any) -> None:
    Quota.objects.filter(tenant=tenant, flavor=flavor).update(gpus=64, borrow_limit=0)
    tenant.cpu_quota, tenant.memory_quota_gib = 10_000, 100_000
    tenant.save()


def _serve_config(member: Member, namespace: str, name: str) -> str:
    found = member.sim.get(RAYSERVICES, namespace, name) or {}
    return str((found.get("spec") or {}).get("serveConfigV2") or "")


def test_services_dispatch_to_the_first_worker_with_room_and_follow_their_copies(
    tmp_path: Path, settings: Any, alice: Any, acme: Any, h100: Any, as_user: Any
) -> None:
    _roomy(acme, h100)
    settings.RAY_IMAGE_ALLOWLIST = [settings.RAY_IMAGE_DEFAULT, OTHER_IMAGE]
    with fleet_of(tmp_path, settings, "hub", "w1", "w2", kueue=True) as fleet:
        hub, w1, w2 = fleet["hub"], fleet["w1"], fleet["w2"]
        # w1 has one H100 node for gangway, w2 four.
        FlavorStock.objects.create(kube_cluster=w1.row, flavor=h100, node_count=1)
        FlavorStock.objects.create(kube_cluster=w2.row, flavor=h100, node_count=4)
        tasks.reconcile()
        wait_for(lambda: _active(hub, "w1") and _active(hub, "w2"), what="workers connected")
        api = as_user(alice)

        first = _service(api, "first")
        original = hub.sim.get(RAYSERVICES, acme.namespace, "first")
        assert original["spec"]["managedBy"] == "kueue.x-k8s.io/multikueue"
        assert original["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "gangway"
        row = _settle(first, State.READY, "first ready on w1", w1, fleet)
        assert row.holds_gpus
        copy = w1.sim.get(RAYSERVICES, acme.namespace, "first")
        assert "managedBy" not in copy["spec"]
        assert copy["metadata"]["labels"]["kueue.x-k8s.io/multikueue-origin"] == "multikueue"
        assert (acme.namespace, "first") not in w2.objects(RAYSERVICES)
        # The manager keeps the original (MultiKueue copies its status back), and no pods.
        assert (acme.namespace, "first") in hub.objects(RAYSERVICES)
        assert not hub.sim.list(RAYCLUSTERS, acme.namespace)
        assert not hub.sim.list("pods", acme.namespace)
        assert w1.sim.list("pods", acme.namespace)
        assert ClusterEvent.objects.filter(
            cluster_id=first, message__contains="dispatched by MultiKueue to w1"
        ).exists()
        details = api.get(SERVICES + "first/").json()
        assert details["kube_cluster"] == "w1"
        assert details["service"]["applications"]["stable_diffusion"]["status"] == "RUNNING"
        # Its endpoint is served from w1's copy (the manager has no Serve to proxy to).
        caller = Client(HTTP_AUTHORIZATION=f"Bearer {AuthToken.objects.create(user=alice)[1]}")
        wait_for(
            lambda: caller.get("/serve/acme/first/").status_code == 200,
            timeout=WAIT,
            what="served from w1",
        )

        # w1's one node is taken: the next goes to w2.
        second = _service(api, "second")
        _settle(second, State.READY, "second ready on w2", w2, fleet)
        assert (acme.namespace, "second") not in w1.objects(RAYSERVICES)

        # A new Serve config is written on the manager's original and reaches w2's copy
        # (KubeRay there updates it in place: the service stays ready).
        answer = api.patch(SERVICES + "second/", {"serve_config": NEW_CONFIG}, format="json")
        assert answer.status_code == 200, answer.content

        def forwarded() -> bool:
            _passes()
            return _serve_config(w2, acme.namespace, "second") == NEW_CONFIG

        wait_for(forwarded, timeout=WAIT, what="the Serve config on w2's copy")
        original = hub.sim.get(RAYSERVICES, acme.namespace, "second")
        assert original["spec"]["serveConfigV2"] == NEW_CONFIG
        # Applied again, the original stays MultiKueue's: the manager still runs nothing.
        assert original["spec"]["managedBy"] == "kueue.x-k8s.io/multikueue"
        assert not hub.sim.list(RAYCLUSTERS, acme.namespace)
        assert _row(second).state == State.READY
        # A new image is not forwarded by MultiKueue: refused, and nothing changes.
        answer = api.patch(SERVICES + "second/", {"image": OTHER_IMAGE}, format="json")
        assert answer.status_code == 409, answer.content
        assert answer.json()["error"]["code"] == "not_forwarded"
        assert "only a new Serve config" in answer.json()["error"]["message"]
        assert _row(second).image != OTHER_IMAGE

        # Deleting the first takes its original off the manager and its copy (and its Ray
        # cluster) off w1.
        answer = api.delete(SERVICES + "first/")
        assert answer.status_code == 202, answer.content
        _settle(first, State.DELETED, "first deleted", None, fleet)
        wait_for(
            lambda: (
                (acme.namespace, "first") not in hub.objects(RAYSERVICES)
                and (acme.namespace, "first") not in w1.objects(RAYSERVICES)
                and not w1.sim.list(RAYCLUSTERS, acme.namespace)
            ),
            timeout=WAIT,
            what="the original and the copy gone",
        )
        assert not _row(first).holds_gpus


def test_a_drained_worker_sends_its_service_to_the_next_worker(
    tmp_path: Path, settings: Any, root: Any, alice: Any, acme: Any, h100: Any, as_user: Any
) -> None:
    """A drain requeues a service (it never ends by itself): the worker leaves the
    tenant's config, Kueue dispatches the service again to the next worker, its copy
    leaves the drained one, and the worker ends drained."""
    _roomy(acme, h100)
    with fleet_of(tmp_path, settings, "hub", "w1", "w2", kueue=True) as fleet:
        hub, w1, w2 = fleet["hub"], fleet["w1"], fleet["w2"]
        for member in (w1, w2):
            FlavorStock.objects.create(kube_cluster=member.row, flavor=h100, node_count=2)
        tasks.reconcile()
        wait_for(lambda: _active(hub, "w1") and _active(hub, "w2"), what="workers connected")
        pk = _service(as_user(alice), "moving")
        _settle(pk, State.READY, "ready on the first worker", w1, fleet)

        drained = as_user(root).post("/api/v1/platform/kube-clusters/w1/drain/", {}, format="json")
        assert drained.status_code == 200, drained.content
        _settle(pk, State.READY, "ready on w2 after the drain", w2, fleet)
        wait_for(
            lambda: (acme.namespace, "moving") not in w1.objects(RAYSERVICES),
            timeout=WAIT,
            what="the copy gone from the drained worker",
        )
        assert (acme.namespace, "moving") in w2.objects(RAYSERVICES)

        def drained_now() -> bool:
            _passes()
            return w1.fresh().drained_at is not None

        wait_for(drained_now, timeout=WAIT, what="w1 drained")
