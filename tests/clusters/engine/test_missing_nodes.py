"""A catalogue that lists nodes the cluster does not have is flagged: the reconcile pass
counts each GPU product's ready nodes (from the node LIST it makes anyway), and a flavor
with fewer than ``node_count`` — none at all, or some — whose node group cannot grow says
so in the API (``missing_nodes``, ``nodes_warning``), on the catalogue and on the
Capacity page. A real worker and kubesim's demo fleet's device-plugin nodes (4 H100 nodes,
4 L4 nodes)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from kubesim import KubeSim
from tenants.models import GpuFlavor
from tests.clusters.engine.conftest import device_plugin_fleet, running_kubesim, wait_for
from tests.factories import GpuFlavorFactory


@pytest.fixture
def kubesim(tmp_path: Path, settings: Any) -> Iterator[KubeSim]:
    """The demo fleet's four H100 nodes that advertise nvidia.com/gpu (not its DRA-managed
    one: which flavor counts that is the DRA capacity view's question, not this test's)."""
    with running_kubesim(tmp_path, settings, fleet=device_plugin_fleet()) as sim:
        yield sim


def test_flavors_whose_nodes_the_cluster_lacks_are_flagged(
    worker: Any, kubesim: Any, root: Any, as_user: Any, h100: Any, l4: Any
) -> None:
    GpuFlavorFactory(name="a100", gpu_product="NVIDIA-A100-SXM4-80GB", node_count=2)
    h100.node_count = 6  # the fleet has 4
    h100.save()
    # The fleet has no A100 either, but this node group grows on demand: not flagged.
    GpuFlavorFactory(
        name="a10", gpu_product="NVIDIA-A10G", gpus_per_node=1, node_count=1, max_node_count=3
    )
    wait_for(
        lambda: not GpuFlavor.objects.filter(observed_nodes__isnull=True).exists(),
        what="the pass's observation of every flavor",
    )

    api = as_user(root)
    flavors = {f["name"]: f for f in api.get("/api/v1/flavors/").json()["results"]}
    assert (flavors["a100"]["observed_nodes"], flavors["a100"]["missing_nodes"]) == (0, 2)
    assert flavors["a100"]["nodes_warning"].startswith(
        "The cluster has 0 of the 2 a100 nodes the catalogue lists"
    )
    assert (flavors["h100"]["observed_nodes"], flavors["h100"]["missing_nodes"]) == (4, 2)
    assert "16 GPUs that do not exist" in flavors["h100"]["nodes_warning"]
    for fine in ("l4", "a10"):
        assert (flavors[fine]["missing_nodes"], flavors[fine]["nodes_warning"]) == (0, "")
    assert api.get("/api/v1/flavors/a100/").json()["missing_nodes"] == 2

    pages = Client()
    pages.force_login(root)
    for url in ("/platform/flavors/", "/capacity/"):
        html = pages.get(url).content.decode()
        assert 'data-missing-nodes="a100"' in html and 'data-missing-nodes="h100"' in html, url
        assert "The cluster has 4 of the 6 h100 nodes the catalogue lists" in html, url
        assert 'data-missing-nodes="l4"' not in html and 'data-missing-nodes="a10"' not in html

    # Once the catalogue says what is there, the warning goes.
    assert api.patch("/api/v1/flavors/h100/", {"node_count": 4}, format="json").status_code == 200
    assert api.get("/api/v1/flavors/h100/").json()["missing_nodes"] == 0
