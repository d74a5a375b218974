"""The GPU catalogue per Kubernetes cluster: the page and the flavor API show each
flavor's nodes, maximum and observation per member beside the fleet's sums; a member's
page lists a flavor's nodes there with a form whose save moves the sums with it, and bad
input stays on the form with nothing changed."""

from __future__ import annotations

from html import unescape
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from clusters.members.stock import stock_set
from clusters.models import FlavorStock, KubeCluster
from tenants.models import GpuFlavor

pytestmark = pytest.mark.django_db


def client_for(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def fleet(root: Any, h100: Any) -> dict[str, KubeCluster]:
    """onprem (4 H100 nodes, seen just now with 3 ready and 16 GPUs free) and cloud
    (2 nodes, growing to 6, not seen yet); the migration's default member lists nothing."""
    FlavorStock.objects.all().delete()
    onprem = KubeCluster.objects.create(name="onprem", placement_order=1)
    cloud = KubeCluster.objects.create(name="cloud", placement_order=2)
    stock_set(actor=root, member=onprem, flavor=h100, node_count=4)
    stock_set(actor=root, member=cloud, flavor=h100, node_count=2, max_node_count=6)
    FlavorStock.objects.filter(kube_cluster=onprem).update(
        observed_nodes=3, observed_free_gpus=16, observed_free_nodes=2, observed_at=timezone.now()
    )
    return {"onprem": onprem, "cloud": cloud}


def _cell(html: str, marker: str) -> str:
    start = html.index(marker)
    return html[start : html.index("</td>", start)]


def test_the_catalogue_page_shows_each_members_nodes_and_the_sums(
    root: Any, fleet: dict[str, KubeCluster]
) -> None:
    html = unescape(client_for(root).get("/platform/flavors/").content.decode())
    cell = _cell(html, 'data-nodes="h100"')
    assert '6 <span class="muted">(up to 10)</span>' in cell and "in the fleet" in cell
    assert "onprem: 4 · 3 seen, 16 GPUs free" in cell
    assert "cloud: 2 (up to 6)" in cell
    assert cell.index("onprem:") < cell.index("cloud:")  # placement order


def test_the_flavor_api_lists_its_nodes_per_cluster(
    as_user: Any, bob: Any, fleet: dict[str, KubeCluster]
) -> None:
    body = as_user(bob).get("/api/v1/flavors/h100/").json()
    assert (body["node_count"], body["max_node_count"]) == (6, 10)
    per_cluster = [
        (c["kube_cluster"], c["node_count"], c["max_node_count"], c["observed_nodes"])
        for c in body["per_cluster"]
    ]
    assert per_cluster == [("onprem", 4, None, 3), ("cloud", 2, 6, None)]
    listed = as_user(bob).get("/api/v1/flavors/").json()["results"]
    assert [c["kube_cluster"] for c in listed[0]["per_cluster"]] == ["onprem", "cloud"]


def test_a_members_page_sets_a_flavors_nodes_there_and_the_sums_follow(
    root: Any, h100: Any, fleet: dict[str, KubeCluster]
) -> None:
    client = client_for(root)
    page = "/platform/kube-clusters/cloud/"
    saved = client.post(
        page + "stock/", {"flavor": "h100", "node_count": "3", "max_node_count": ""}
    )
    assert saved.status_code == 302
    h100.refresh_from_db()
    assert (h100.node_count, h100.max_node_count) == (7, None)
    for bad in (
        {"flavor": "h100", "node_count": "-2"},
        {"flavor": "a100", "node_count": "2"},
        {"flavor": "h100", "node_count": "4", "max_node_count": "2"},
    ):
        refused = client.post(page + "stock/", bad)
        assert refused.status_code == 400, bad
        assert 'class="error"' in refused.content.decode()
    assert GpuFlavor.objects.get(pk=h100.pk).node_count == 7
    assert FlavorStock.objects.get(kube_cluster=fleet["cloud"]).node_count == 3
    html = unescape(client.get(page).content.decode())
    assert "Caps on tenants' quotas here" in html and 'id="stock-form"' in html
