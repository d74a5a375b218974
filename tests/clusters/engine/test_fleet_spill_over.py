"""Spill-over end to end, across two kubesim processes: requests made through the API are
placed by the admission pass on the first member with room for the whole gang, and the
engine builds each one on its own member only. The members' free GPUs are what the
reconcile pass saw on each kubesim, not figures written by the test."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from clusters import tasks
from clusters.domain.states import State
from clusters.models import ClusterRequest, FlavorStock
from clusters.queue.admission_pass import run_admission_pass
from tenants.models import Quota
from tests.clusters.engine.conftest import wait_for
from tests.clusters.engine.fleet_sims import fleet_of

pytestmark = pytest.mark.django_db(transaction=True)

CLUSTERS = "/api/v1/tenants/acme/clusters/"
RAYCLUSTERS = "rayclusters.ray.io"


@pytest.fixture(autouse=True)
def _quiet_broker(broker: Any) -> None:
    """Passes ask for more passes: those messages go to a queue nobody consumes."""


def test_a_full_member_spills_the_next_gang_over_to_the_next(
    tmp_path: Path, settings: Any, acme: Any, bob: Any, h100: Any, as_user: Any
) -> None:
    acme.max_dev_clusters_per_user = 10
    acme.max_dev_gpus_per_user = 100
    acme.cpu_quota, acme.memory_quota_gib = 10_000, 100_000  # GPUs bind, nothing else
    acme.save()
    Quota.objects.filter(tenant=acme, flavor=h100).update(gpus=100)
    api = as_user(bob)
    with fleet_of(tmp_path, settings, "onprem", "cloud") as fleet:
        for member in fleet.values():
            FlavorStock.objects.create(kube_cluster=member.row, flavor=h100, node_count=4)
        h100.node_count = 8  # the catalogue's count is the fleet's
        h100.save()
        # A pass on each member records what its nodes have free (4 nodes of 8 H100).
        tasks.reconcile()
        seen = {
            s.kube_cluster.name: s.observed_free_gpus
            for s in FlavorStock.objects.filter(flavor=h100)
        }
        assert seen == {"onprem": 32, "cloud": 32}

        # 16 + 8 single-GPU workers go to onprem, the first in placement order (8 left).
        for name, workers in (("big1", 16), ("big2", 8)):
            big = {"name": name, "flavor": "h100", "workers": workers}
            assert api.post(CLUSTERS, big, format="json").status_code == 201
        # The verdict of the next one counts the gangs queued ahead of it: it says where
        # it would run, and why not onprem.
        ask = {"name": "next", "flavor": "h100", "workers": 12}
        verdict = api.post(CLUSTERS + "dry-run/", ask, format="json").json()
        assert verdict["kube_cluster"] == "cloud", verdict
        assert verdict["headline"] == (
            "Fits now on h100 in cloud (onprem has 8 h100 GPUs free, 12 GPUs needed): "
            "12 GPUs charged."
        )
        assert api.post(CLUSTERS, ask, format="json").status_code == 201
        admitted = run_admission_pass().admitted
        rows = {r.name: r for r in ClusterRequest.objects.filter(pk__in=admitted)}
        assert set(rows) == {"big1", "big2", "next"}
        assert rows["big1"].kube_cluster == rows["big2"].kube_cluster == fleet["onprem"].row
        assert rows["next"].kube_cluster == fleet["cloud"].row
        assert rows["next"].events.filter(message__contains="onprem has 8 h100 GPUs free").exists()
        assert api.get(CLUSTERS + "next/").json()["kube_cluster"] == "cloud"

        tasks.provision_clusters([r.pk for r in rows.values()])
        ns = acme.namespace
        assert fleet["onprem"].objects(RAYCLUSTERS) == {(ns, "big1"), (ns, "big2")}
        assert fleet["cloud"].objects(RAYCLUSTERS) == {(acme.namespace, "next")}

        def ready() -> bool:
            tasks.reconcile()
            states = ClusterRequest.objects.filter(pk__in=admitted).values_list("state", flat=True)
            return set(states) == {State.READY}

        wait_for(ready, timeout=60, what="every cluster ready, each on its member")
        # What each member has left is what its own pods took.
        stock = {
            s.kube_cluster.name: s.observed_free_gpus
            for s in FlavorStock.objects.filter(flavor=h100)
        }
        assert stock == {"onprem": 8, "cloud": 20}
        # Two more gangs: 16 fits in cloud's 20; then 12 fits nowhere whole (onprem has
        # 8, cloud 4) though the fleet's 12 would hold it: a gang is never split.
        for name, workers in (("third", 16), ("fourth", 12)):
            more = {"name": name, "flavor": "h100", "workers": workers}
            assert api.post(CLUSTERS, more, format="json").status_code == 201
        placed = ClusterRequest.objects.filter(pk__in=run_admission_pass().admitted)
        assert [(r.name, r.kube_cluster.name) for r in placed] == [("third", "cloud")]
        waiting = ClusterRequest.objects.get(name="fourth")
        assert waiting.state == State.QUEUED and waiting.kube_cluster is None
        assert waiting.queue_reason == "capacity"
        assert waiting.queue_message == (
            "No cluster it may use has room for the whole gang now (onprem has 8 h100 GPUs "
            "free, 12 GPUs needed; cloud has 4 h100 GPUs free, 12 GPUs needed)."
        )
