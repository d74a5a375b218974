"""The fleet's data migration (clusters 0023): a deployment from before the fleet finds
its one Kubernetes cluster as the first member, "default", signed in to with settings,
holding every flavor's nodes and every request that was placed."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from tests.clusters.test_migrations import _migrate, back_to_latest

BEFORE = ("clusters", "0001_squashed_0022")
AFTER = ("clusters", "0023_fleet")


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures(back_to_latest.__name__)
def test_the_cluster_of_settings_becomes_member_default_with_the_flavors_and_requests(
    alice: Any, acme: Any, h100: Any, l4: Any
) -> None:
    h100.max_node_count = 8
    h100.save()
    old = _migrate(BEFORE)
    Row = old.get_model("clusters", "ClusterRequest")

    def row(name: str, state: str) -> Any:
        return Row.objects.create(
            tenant_id=acme.pk,
            owner_id=alice.pk,
            flavor_id=h100.pk,
            name=name,
            kind="dev",
            state=state,
            gpus=Decimal(8),
            cpu=8,
            memory_gib=64,
        )

    running, waiting = row("running", "ready"), row("waiting", "queued")

    new = _migrate(AFTER)
    KubeCluster = new.get_model("clusters", "KubeCluster")
    Stock = new.get_model("clusters", "FlavorStock")
    Row = new.get_model("clusters", "ClusterRequest")
    (member,) = KubeCluster.objects.all()
    assert (member.name, member.from_settings, member.placement_order) == ("default", True, 0)
    assert member.schedulable == "active" and not member.token_encrypted
    stock = {
        s.flavor.name: (s.node_count, s.max_node_count)
        for s in Stock.objects.select_related("flavor")
    }
    assert stock == {"h100": (h100.node_count, 8), "l4": (l4.node_count, None)}
    assert Row.objects.get(pk=running.pk).kube_cluster_id == member.pk
    assert Row.objects.get(pk=waiting.pk).kube_cluster_id is None
