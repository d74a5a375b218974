"""Inter-pod affinity over a topology key in kubesim's scheduler, as kube-scheduler has it:
a gang that requires one rack lands in one rack (the first pod anywhere, the rest beside
it) and the one that does not fit waits with the scheduler's words; anti-affinity spreads;
a preferred term draws a pod to its peers' rack; kubectl shows where they went."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from subprocess import CompletedProcess
from typing import Any

import pytest
from kubernetes import client
from kubesim_helpers import H100, pod_manifest

from kubesim import KubeSim

Kubectl = Callable[..., CompletedProcess[str]]
RACK = "network.topology.kubernetes.io/rack"
HOST = "kubernetes.io/hostname"
FLEET: dict[str, Any] = {
    "name": "aff",
    "pools": [
        {
            "name": "h100",
            "count": 4,
            "labels": {"nvidia.com/gpu.product": H100, "nvidia.com/gpu.count": "8"},
            "allocatable": {"cpu": "192", "memory": "1800Gi", "nvidia.com/gpu": "8", "pods": "110"},
            "taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}],
            "topology": [{"key": RACK, "nodes": 2}],
        },
        {"name": "cpu", "count": 1, "allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"}},
    ],
}


@pytest.fixture
def sim() -> Iterator[KubeSim]:
    """Four 8 x H100 nodes in two racks of two, and a CPU node."""
    s = KubeSim(fleet=FLEET, startup_delay=0.0).start()
    try:
        yield s
    finally:
        s.stop()


def _term(group: str, key: str) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": {"gang": group}}, "topologyKey": key}


def _pod(name: str, group: str, affinity: dict[str, Any], gpu: int = 8) -> dict[str, Any]:
    body = pod_manifest(name, gpu=gpu, cpu="8", product=H100, tolerate=True, affinity=affinity)
    body["metadata"]["labels"] = {"gang": group}
    return body


def _nodes(core: client.CoreV1Api, names: list[str]) -> dict[str, str | None]:
    """Each pod's node once every one is bound or has been found unschedulable."""
    deadline = time.monotonic() + 20
    while True:
        pods = {n: core.read_namespaced_pod(n, "default") for n in names}
        settled = all(
            p.spec.node_name
            or any(c.reason == "Unschedulable" for c in (p.status.conditions or []))
            for p in pods.values()
        )
        if settled or time.monotonic() > deadline:
            return {n: p.spec.node_name for n, p in pods.items()}
        time.sleep(0.05)


def _rack(core: client.CoreV1Api, node: str | None) -> str:
    assert node is not None
    return str(core.read_node(node).metadata.labels[RACK])


def test_a_gang_that_requires_one_rack_fills_one_and_the_rest_waits_with_the_reason(
    kube_api: client.ApiClient, kubectl: Kubectl
) -> None:
    core = client.CoreV1Api(kube_api)
    same_rack = {
        "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [_term("a", RACK)]}
    }
    names = ["a-0", "a-1", "a-2"]
    for name in names:
        core.create_namespaced_pod("default", _pod(name, "a", same_rack))
    where = _nodes(core, names)
    placed = [n for n in names if where[n]]
    assert len(placed) == 2, where
    assert len({_rack(core, where[n]) for n in placed}) == 1
    (left,) = [n for n in names if not where[n]]
    cond = next(
        c
        for c in core.read_namespaced_pod(left, "default").status.conditions or []
        if c.type == "PodScheduled"
    )
    assert cond.reason == "Unschedulable"
    assert "2 node(s) didn't match pod affinity rules" in cond.message
    assert "2 Insufficient nvidia.com/gpu" in cond.message
    # kubectl shows the gang's nodes, and both carry the same rack label.
    out = kubectl("get", "pods", "-l", "gang=a", "-o", "json").stdout
    nodes = {p["spec"].get("nodeName") for p in json.loads(out)["items"]} - {None}
    racks = kubectl("get", "nodes", *sorted(nodes), "-L", RACK, "--no-headers").stdout.split("\n")
    assert len({line.split()[-1] for line in racks if line.strip()}) == 1


def test_anti_affinity_spreads_and_a_preferred_term_draws_a_pod_to_its_peers_rack(
    kube_api: client.ApiClient,
) -> None:
    core = client.CoreV1Api(kube_api)
    apart = {
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [_term("s", HOST)]}
    }
    for name in ("s-0", "s-1"):
        core.create_namespaced_pod("default", _pod(name, "s", apart, gpu=1))
    spread = _nodes(core, ["s-0", "s-1"])
    # Without the term both one-GPU pods would bin-pack onto one node.
    assert spread["s-0"] and spread["s-1"] and spread["s-0"] != spread["s-1"]

    core.create_namespaced_pod("default", _pod("p-0", "p", {}, gpu=8))
    first = _nodes(core, ["p-0"])["p-0"]
    near = {
        "podAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 100, "podAffinityTerm": _term("p", RACK)}
            ]
        }
    }
    core.create_namespaced_pod("default", _pod("p-1", "p", near, gpu=8))
    second = _nodes(core, ["p-1"])["p-1"]
    assert second is not None and second != first
    assert _rack(core, second) == _rack(core, first)
