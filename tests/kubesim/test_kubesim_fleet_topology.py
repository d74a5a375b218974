"""Fleet files' topology levels: nodes labelled by block, rack or NVLink domain in
consecutive runs, as a topology labeller or GPU Feature Discovery writes them, readable
with kubectl's label selectors; levels that do not nest are refused."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from kubesim import KubeSim
from kubesim.fleet import build_nodes, load_fleet

LARGE = Path(__file__).resolve().parents[2] / "kubesim" / "fleets" / "large.yaml"
BLOCK = "network.topology.kubernetes.io/block"
RACK = "network.topology.kubernetes.io/rack"
CLIQUE = "nvidia.com/gpu.clique"


def test_the_large_fleet_has_blocks_of_racks_and_gb200_nvlink_domains() -> None:
    nodes = build_nodes(load_fleet(str(LARGE)))
    h100 = [
        n["metadata"]["labels"] for n in nodes if n["metadata"]["name"].startswith("large-h100-")
    ]
    assert Counter(labels[BLOCK] for labels in h100) == {"h100-block-0": 32, "h100-block-1": 32}
    assert Counter(labels[RACK] for labels in h100) == {f"h100-rack-{r}": 8 for r in range(8)}
    # Racks nest in blocks: every rack lies in exactly one block.
    blocks_of_rack: dict[str, set[str]] = {}
    for labels in h100:
        blocks_of_rack.setdefault(labels[RACK], set()).add(labels[BLOCK])
    assert all(len(blocks) == 1 for blocks in blocks_of_rack.values())
    gb200 = [
        n["metadata"]["labels"] for n in nodes if n["metadata"]["name"].startswith("large-gb200-")
    ]
    cliques = Counter(labels[CLIQUE] for labels in gb200)
    assert sorted(cliques.values()) == [18, 18]
    assert all(c.startswith("7c1e0d52-9b4f-4d7a-8e63-5a2f1b9c0e41.") for c in cliques)
    cpu = [n["metadata"]["labels"] for n in nodes if n["metadata"]["name"].startswith("large-cpu-")]
    assert not any(RACK in labels for labels in cpu)


@pytest.mark.parametrize(
    ("topology", "words"),
    [
        ([{"key": RACK, "nodes": 0}], "bad topology level"),
        ([{"key": "not a key!", "nodes": 4}], "bad topology level"),
        ([{"key": BLOCK, "nodes": 6}, {"key": RACK, "nodes": 4}], "does not nest"),
        ({"key": RACK}, "topology is a list"),
    ],
)
def test_topology_levels_that_are_malformed_or_do_not_nest_are_refused(
    topology: Any, words: str
) -> None:
    fleet = {
        "name": "t",
        "pools": [{"name": "gpu", "count": 8, "allocatable": {"cpu": "8"}, "topology": topology}],
    }
    with pytest.raises(ValueError, match=words):
        load_fleet(fleet)


def test_kubectl_style_selectors_find_a_racks_nodes(kube_api: Any) -> None:
    """Through the API server: a label selector on a rack lists its nodes only."""
    from kubernetes import client

    core = client.CoreV1Api(kube_api)
    racks = Counter(n.metadata.labels.get(RACK) for n in core.list_node(label_selector=RACK).items)
    assert racks == {"h100-rack-0": 2, "h100-rack-1": 2}
    one = core.list_node(label_selector=f"{RACK}=h100-rack-1").items
    assert sorted(n.metadata.name for n in one) == ["topo-h100-2", "topo-h100-3"]


@pytest.fixture
def sim() -> Any:
    fleet = {
        "name": "topo",
        "pools": [
            {
                "name": "h100",
                "count": 4,
                "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
                "allocatable": {"cpu": "192", "memory": "1800Gi", "nvidia.com/gpu": "8"},
                "topology": [{"key": RACK, "nodes": 2}],
            },
            {"name": "cpu", "count": 1, "allocatable": {"cpu": "32", "memory": "128Gi"}},
        ],
    }
    s = KubeSim(fleet=fleet, startup_delay=0.0).start()
    try:
        yield s
    finally:
        s.stop()
