"""A flavor's nodes per member: the one service that writes them keeps the flavor's own
counts equal to their sums, through the API too; the catalogue refuses to set the sums of
a flavor listed on several members; make run's seed goes through it and spills a request
over to cloud."""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.db.models import Sum

from clusters.members.stock import stock_set
from clusters.models import ClusterRequest, FlavorStock, KubeCluster
from tenants.models import GpuFlavor
from tenants.services import flavor_update

pytestmark = pytest.mark.django_db

URL = "/api/v1/platform/kube-clusters/"


def _sums_hold() -> None:
    """Every stocked flavor's node count is the sum of its members' (its maximum too,
    counting a member that cannot grow at its node count)."""
    for flavor in GpuFlavor.objects.all():
        rows = list(FlavorStock.objects.filter(flavor=flavor))
        if not rows:
            continue
        assert flavor.node_count == sum(r.node_count for r in rows), flavor.name
        most = sum(max(r.max_node_count or 0, r.node_count) for r in rows)
        assert max(flavor.max_node_count or 0, flavor.node_count) == most, flavor.name


def test_setting_stock_moves_the_flavor_totals_with_it(root: Any, h100: Any) -> None:
    onprem = KubeCluster.objects.get(name="default")
    cloud = KubeCluster.objects.create(name="cloud", placement_order=10)
    stock_set(actor=root, member=onprem, flavor=h100, node_count=4)
    stock_set(actor=root, member=cloud, flavor=h100, node_count=2, max_node_count=6)
    h100.refresh_from_db()
    assert (h100.node_count, h100.max_node_count) == (6, 10)
    _sums_hold()
    stock_set(actor=root, member=cloud, flavor=h100, node_count=None)
    h100.refresh_from_db()
    assert (h100.node_count, h100.max_node_count) == (4, None)
    _sums_hold()
    with pytest.raises(ValidationError):
        stock_set(actor=root, member=onprem, flavor=h100, node_count=4, max_node_count=2)
    assert FlavorStock.objects.get(kube_cluster=onprem, flavor=h100).max_node_count is None


def test_the_api_sets_a_members_stock_and_refuses_bad_input(
    as_user: Any, root: Any, alice: Any, h100: Any
) -> None:
    KubeCluster.objects.create(name="cloud", placement_order=10)
    api = as_user(root)
    answer = api.put(URL + "cloud/stock/", {"flavor": "h100", "node_count": 3}, format="json")
    assert answer.status_code == 200, answer.content
    assert [(s["flavor"], s["node_count"]) for s in answer.json()["stock"]] == [("h100", 3)]
    _sums_hold()
    before = list(
        FlavorStock.objects.values_list("kube_cluster__name", "flavor__name", "node_count")
    )
    for body in (
        {"flavor": "h100", "node_count": -1},
        {"flavor": "a100", "node_count": 1},
        {"flavor": "h100", "node_count": 4, "max_node_count": 2},
        {"flavor": "h100", "node_count": "4"},
    ):
        refused = api.put(URL + "cloud/stock/", body, format="json")
        assert refused.status_code == 400, (body, refused.content)
    assert api.put(URL + "nowhere/stock/", {"flavor": "h100", "node_count": 1}).status_code == 404
    denied = as_user(alice).put(URL + "cloud/stock/", {"flavor": "h100", "node_count": 9})
    assert denied.status_code == 403
    after = FlavorStock.objects.values_list("kube_cluster__name", "flavor__name", "node_count")
    assert list(after) == before


def test_the_catalogue_sets_a_flavor_of_one_member_and_refuses_one_of_several(
    root: Any, h100: Any
) -> None:
    onprem = KubeCluster.objects.get(name="default")
    stock_set(actor=root, member=onprem, flavor=h100, node_count=4)
    flavor_update(actor=root, flavor=h100, changes={"node_count": 5})
    assert FlavorStock.objects.get(flavor=h100).node_count == 5
    _sums_hold()
    cloud = KubeCluster.objects.create(name="cloud", placement_order=10)
    stock_set(actor=root, member=cloud, flavor=h100, node_count=2)
    with pytest.raises(ValidationError, match="listed on 2 Kubernetes clusters"):
        flavor_update(
            actor=root, flavor=GpuFlavor.objects.get(pk=h100.pk), changes={"node_count": 9}
        )
    assert GpuFlavor.objects.get(pk=h100.pk).node_count == 7
    # What is not a node count still changes.
    flavor_update(actor=root, flavor=GpuFlavor.objects.get(pk=h100.pk), changes={"sharing": True})
    _sums_hold()


def test_make_runs_seed_lists_stock_through_the_service_and_spills_over_to_cloud() -> None:
    for command, args in (
        ("seed_demo", []),
        ("seed_demo_service", []),
        ("seed_demo_fleet", ["http://127.0.0.1:9", "--token", "t"]),  # and the scene
    ):
        call_command(command, *args, stdout=StringIO())
    l4 = GpuFlavor.objects.get(name="l4")
    assert (l4.node_count, l4.max_node_count) == (4 + 3, 4 + 8)
    _sums_hold()
    where = dict(ClusterRequest.objects.unscoped().values_list("name", "kube_cluster__name"))
    assert where == {
        "text-to-image": "onprem",
        "emma-l4-sweep": "onprem",
        "eve-l4-notebook": "onprem",
        "sam-l4-eval": "cloud",
    }
    spilled = ClusterRequest.objects.unscoped().get(name="sam-l4-eval")
    assert spilled.events.filter(
        message__contains="admitted to run in cloud (onprem is full)"
    ).exists()
    onprem_l4 = ClusterRequest.objects.unscoped().filter(kube_cluster__name="onprem", flavor=l4)
    assert onprem_l4.aggregate(gpus=Sum("gpus"))["gpus"] == 4  # all of onprem's L4s
    # Idempotent: a second run changes nothing.
    rows = ClusterRequest.objects.unscoped().count()
    call_command("seed_demo_fleet", "http://127.0.0.1:9", "--token", "t", stdout=StringIO())
    assert ClusterRequest.objects.unscoped().count() == rows
    l4.refresh_from_db()
    assert l4.node_count == 7
