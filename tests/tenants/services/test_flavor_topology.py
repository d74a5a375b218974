"""A flavor's topology: node label keys, coarse to fine, set through the API and the
catalogue form; malformed levels are refused naming the field, and nothing changes."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from tenants.models import GpuFlavor

RACK = "network.topology.kubernetes.io/rack"
BLOCK = "network.topology.kubernetes.io/block"


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("levels", "words"),
    [
        (["not a key!"], "is not a node label key"),
        ([RACK, RACK], "Each level once"),
        ([f"l{i}" for i in range(9)], "At most 8 levels"),
    ],
)
def test_bad_levels_are_a_400_and_change_nothing(
    root: Any, as_user: Any, h100: Any, levels: list[str], words: str
) -> None:
    response = as_user(root).patch("/api/v1/flavors/h100/", {"topology": levels}, format="json")
    assert response.status_code == 400, response.content
    assert words in str(response.json()["error"]["fields"]["topology"])
    assert GpuFlavor.objects.get(pk=h100.pk).topology == []


@pytest.mark.django_db
def test_levels_are_set_by_the_api_and_by_the_form_one_per_line(
    root: Any, as_user: Any, h100: Any
) -> None:
    response = as_user(root).patch(
        "/api/v1/flavors/h100/", {"topology": [BLOCK, RACK]}, format="json"
    )
    assert response.status_code == 200, response.content
    assert response.json()["topology"] == [BLOCK, RACK]
    client = Client()
    client.force_login(root)
    page = client.get("/platform/flavors/").content.decode()
    assert f"topology: {BLOCK} \u203a {RACK}" in page  # levels joined by an angle quote
    form = {
        "gpu_product": h100.gpu_product,
        "gpus_per_node": h100.gpus_per_node,
        "cpu_per_node": h100.cpu_per_node,
        "memory_per_node_gib": h100.memory_per_node_gib,
        "node_count": h100.node_count,
        "topology": f"{RACK}\nnvidia.com/gpu.clique",
    }
    assert client.post("/platform/flavors/h100/", form).status_code == 302
    assert GpuFlavor.objects.get(pk=h100.pk).topology == [RACK, "nvidia.com/gpu.clique"]
