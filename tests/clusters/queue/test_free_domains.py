"""Where a flavor's whole free nodes are (clusters.queue.free_domains): the reconciler's
count per combination of domains from its node and pod LISTs, the members' counts merged
for the fleet, and what the admission pass may hand out once admitted gangs whose pods
are not bound yet are taken off — in their domain when pinned."""

from __future__ import annotations

from typing import Any

from clusters.queue.free_domains import for_admission, free_domains_by_flavor, merged

BLOCK = "network.topology.kubernetes.io/block"
RACK = "network.topology.kubernetes.io/rack"
H100 = "NVIDIA-H100-80GB-HBM3"


def _node(name: str, block: str, rack: str, *, ready: bool = True) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "labels": {"nvidia.com/gpu.product": H100, BLOCK: block, RACK: rack},
        },
        "status": {
            "allocatable": {"nvidia.com/gpu": "8"},
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def _pod(node: str, gpus: int) -> dict[str, Any]:
    return {
        "spec": {
            "nodeName": node,
            "containers": [{"resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}],
        },
        "status": {"phase": "Running"},
    }


def test_whole_free_nodes_are_counted_per_domain(h100: Any, l4: Any) -> None:
    h100.topology = [BLOCK, RACK]
    nodes = [
        _node("n1", "b0", "r1"),
        _node("n2", "b0", "r1"),
        _node("n3", "b0", "r2"),
        _node("n4", "b1", "r3", ready=False),
        _node("n5", "b1", "r3"),
    ]
    # One GPU taken on n2: not a whole free node any more.
    seen = free_domains_by_flavor([h100, l4], nodes, [_pod("n2", 1)])
    assert seen == {
        "h100": {
            "levels": [BLOCK, RACK],
            "nodes": [[["b0", "r1"], 1], [["b0", "r2"], 1], [["b1", "r3"], 1]],
            # The largest domain of each level counts its ready nodes, free or not.
            "largest": {BLOCK: 3, RACK: 2},
        }
    }  # l4 has no topology: not counted


def test_members_merge_and_admission_takes_off_what_admitted_gangs_will_take(h100: Any) -> None:
    h100.topology = [BLOCK, RACK]
    one = {
        "levels": [BLOCK, RACK],
        "nodes": [[["b0", "r1"], 3], [["b0", "r2"], 1]],
        "largest": {BLOCK: 8, RACK: 4},
    }
    two = {"levels": [BLOCK, RACK], "nodes": [[["b0", "r1"], 2]], "largest": {RACK: 6}}
    both = merged([one, None, two])
    assert both == {
        "levels": [BLOCK, RACK],
        "nodes": [[["b0", "r1"], 5], [["b0", "r2"], 1]],
        # A gang never spans members: the fleet's largest domain is a member's largest.
        "largest": {BLOCK: 8, RACK: 6},
    }
    assert merged([one, {"levels": [RACK], "nodes": []}]) is None
    # A gang pinned to r1 will take 2 there; one of 1 node not pinned takes it from the
    # emptiest rack (r1 still, with 3 left against r2's 1); at most 5 in all.
    free = for_admission(h100, both, nodes_left=5, pinned=[(RACK, "r1", 2)], unpinned=1)
    assert sorted(free or ()) == [("b0", "r1")] * 2 + [("b0", "r2")]
    # Observed with other levels than the flavor's now: unknown.
    h100.topology = [RACK]
    assert for_admission(h100, both, nodes_left=5) is None
