"""``--kube-cluster`` and ``--region`` on ``up``, ``job submit`` and ``service submit``
ask placement for a member of the fleet or a region (docs/fleet.md, "Placement"); a name
the server refuses is an error with its words, and nothing is created."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from clusters.models import ClusterRequest, KubeCluster
from tests.cli.conftest import Run
from tests.cli.test_stack import quiet

__all__ = ["quiet"]

pytestmark = pytest.mark.django_db(transaction=True)


def test_up_and_submit_ask_for_a_cluster_or_a_region(
    cli: Callable[..., Run], login: Any, bob: Any, quiet: None
) -> None:
    KubeCluster.objects.create(name="cloud", region="us", placement_order=5)
    login("bob")
    up = cli("up", "on-cloud", "--flavor", "h100", "--kube-cluster", "cloud", "--no-wait")
    assert up.code == 0, up
    job = cli(
        "job", "submit", "-c", "python x.py", "--name", "in-us", "-f", "h100", "--region", "us"
    )
    assert job.code == 0, job
    wanted = {
        r.name: (r.wanted_kube_cluster.name if r.wanted_kube_cluster else "", r.wanted_region)
        for r in ClusterRequest.objects.select_related("wanted_kube_cluster")
    }
    assert wanted == {"on-cloud": ("cloud", ""), "in-us": ("", "us")}
    refused = cli("up", "nowhere", "--flavor", "h100", "--kube-cluster", "mars", "--no-wait")
    assert refused.code != 0
    assert "no Kubernetes cluster called 'mars'" in refused.err + refused.out
    assert not ClusterRequest.objects.filter(name="nowhere").exists()


def test_up_asks_that_a_production_gang_share_a_rack(
    cli: Callable[..., Run], login: Any, alice: Any, h100: Any, quiet: None
) -> None:
    rack = "network.topology.kubernetes.io/rack"
    h100.topology = [rack]
    h100.save()
    login("alice")
    up = cli(
        "up", "train", "--kind", "prod", "--flavor", "h100", "--topology", rack,
        "--topology-mode", "preferred", "--no-wait",
    )  # fmt: skip
    assert up.code == 0, up
    row = ClusterRequest.objects.get(name="train")
    assert (row.topology_level, row.topology_mode) == (rack, "preferred")
    # Where admission pinned it shows in its status (here written as the pass would).
    ClusterRequest.objects.filter(pk=row.pk).update(topology_domain="h100-rack-1")
    status = cli("status", "train")
    assert status.code == 0, status
    assert f"{rack} (preferred), pinned to h100-rack-1" in status.out
    # A dev cluster asking for one is refused with the server's words; nothing is created.
    refused = cli("up", "dev-rack", "--flavor", "h100", "--topology", rack, "--no-wait")
    assert refused.code != 0
    assert "Only a production cluster" in refused.err + refused.out
    assert not ClusterRequest.objects.filter(name="dev-rack").exists()
