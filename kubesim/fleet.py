"""Fleet files: pools of identical nodes, turned into Node objects.

A fleet is YAML (or a dict) with a ``name`` and ``pools``; each pool has a ``count``, node
``labels``, ``allocatable`` resources, optional ``capacity`` (defaults to allocatable),
``taints`` and an ``instanceType``. Nodes are named ``<fleet>-<pool>-<index>``. A pool
with a ``maxCount`` is a node group the emulated cluster autoscaler may grow up to it
(``autoscaler.py``; the fleet's optional ``autoscaler`` map holds its timings). A GPU
pool whose ``allocatable`` has no ``nvidia.com/gpu`` is managed by the simulated DRA driver
(``dra/driver.py``) instead of NVIDIA's device plugin: its GPUs (``nvidia.com/gpu.count``)
are ResourceSlice devices that pods claim; its ``mig`` (``{profile: 1g.10gb, perGpu: 7}`` or
a list) partitions each of them. A pool's ``topology`` lists its network levels, coarse to
fine, each a node label key and how many consecutive nodes share a value (e.g. blocks of
32 nodes, racks of 8, or an NVLink domain's ``nvidia.com/gpu.clique`` of 18 GB200 trays), as
a cluster's topology labeller or NVIDIA's GPU Feature Discovery writes them.
"""

from __future__ import annotations

import os
import re
from typing import Any

import yaml

from kubesim.dra.driver import mig_layout
from kubesim.errors import ApiError

FLEET_DIR = os.path.join(os.path.dirname(__file__), "fleets")
DEMO_FLEET = os.path.join(FLEET_DIR, "demo.yaml")


def load_fleet(fleet: str | dict[str, Any] | None) -> dict[str, Any]:
    """Read a fleet from a path or take a dict as is; ``None`` means the demo fleet."""
    if fleet is None:
        fleet = DEMO_FLEET
    if isinstance(fleet, dict):
        data = fleet
    else:
        with open(fleet, encoding="utf-8") as fh:
            data = yaml.safe_load(fh)
    if not isinstance(data, dict) or not isinstance(data.get("pools"), list):
        raise TypeError("a fleet needs a 'pools' list")
    for pool in data["pools"]:
        for key in ("name", "count", "allocatable"):
            if key not in pool:
                raise ValueError(f"fleet pool {pool.get('name', '?')!r} lacks {key!r}")
        # maxCount: the pool is a cluster-autoscaler node group that may grow (autoscaler.py).
        if "maxCount" in pool and int(pool["maxCount"]) < int(pool["count"]):
            raise ValueError(f"fleet pool {pool['name']!r}: maxCount is below count")
        mig_layout(pool)  # a MIG layout a GPU cannot hold is refused here
        topology_levels(pool)  # and topology levels that do not nest
    return data


_LABEL_KEY = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)


def topology_levels(pool: dict[str, Any]) -> list[tuple[str, int, str]]:
    """The pool's ``topology`` as (label key, nodes per domain, value prefix), coarse to
    fine; ValueError when a level is malformed or does not nest in the one above it (a
    rack lies in one block: a coarser level's size is a multiple of a finer one's)."""
    levels = pool.get("topology") or []
    if not isinstance(levels, list):
        raise ValueError(f"fleet pool {pool.get('name')!r}: topology is a list of levels")
    out: list[tuple[str, int, str]] = []
    for level in levels:
        key = str((level or {}).get("key") or "") if isinstance(level, dict) else ""
        try:
            size = int(level.get("nodes", 0)) if isinstance(level, dict) else 0
        except (TypeError, ValueError):
            size = 0
        if not _LABEL_KEY.match(key) or size < 1:
            raise ValueError(
                f"fleet pool {pool.get('name')!r}: bad topology level {level!r} "
                "(needs a label key and nodes >= 1)"
            )
        if out and out[-1][1] % size:
            raise ValueError(
                f"fleet pool {pool.get('name')!r}: topology level {key} ({size} nodes) does "
                f"not nest in {out[-1][0]} ({out[-1][1]} nodes)"
            )
        word = key.rsplit("/", 1)[-1].rsplit(".", 1)[-1]
        out.append((key, size, str(level.get("prefix") or f"{pool['name']}-{word}-")))
    return out


def build_nodes(fleet: dict[str, Any]) -> list[dict[str, Any]]:
    """Node objects (metadata without uid/resourceVersion) for every node of the fleet."""
    fleet_name = str(fleet.get("name") or "sim")
    nodes: list[dict[str, Any]] = []
    ip = 0
    for pool in fleet["pools"]:
        for i in range(int(pool["count"])):
            ip += 1
            nodes.append(pool_node(fleet_name, pool, i, f"10.0.{ip // 250}.{ip % 250 + 1}"))
    return nodes


def pool_node(fleet_name: str, pool: dict[str, Any], index: int, ip: str) -> dict[str, Any]:
    """Node ``index`` of ``pool``: named ``<fleet>-<pool>-<index>``, with the pool's labels,
    taints and resources (also what the cluster autoscaler adds to a growing pool)."""
    alloc = {str(k): str(v) for k, v in (pool.get("allocatable") or {}).items()}
    capacity = {str(k): str(v) for k, v in (pool.get("capacity") or alloc).items()}
    instance = str(pool.get("instanceType") or pool["name"])
    name = f"{fleet_name}-{pool['name']}-{index}"
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "node.kubernetes.io/instance-type": instance,
        "kubesim.io/pool": str(pool["name"]),
        "type": "kwok",
    }
    labels.update({str(k): str(v) for k, v in (pool.get("labels") or {}).items()})
    for key, size, prefix in topology_levels(pool):
        labels[key] = f"{prefix}{index // size}"
    taints = [
        {
            "key": t["key"],
            "effect": t.get("effect", "NoSchedule"),
            **({"value": t["value"]} if t.get("value") else {}),
        }
        for t in pool.get("taints") or []
    ]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "kwok.x-k8s.io/node": "fake",
            },
        },
        "spec": {"taints": taints} if taints else {},
        "status": {
            "capacity": dict(capacity),
            "allocatable": dict(alloc),
            "addresses": [
                {"type": "InternalIP", "address": ip},
                {"type": "Hostname", "address": name},
            ],
            "nodeInfo": {
                "kubeletVersion": "v1.33.0-kubesim",
                "architecture": "amd64",
                "operatingSystem": "linux",
                "osImage": "kubesim",
                "containerRuntimeVersion": "kubesim://1.0",
                "kernelVersion": "6.8.0",
                "kubeProxyVersion": "",
                "machineID": "",
                "systemUUID": "",
                "bootID": "",
            },
            "phase": "Running",
        },
    }


def node_conditions(now: str) -> list[dict[str, Any]]:
    """The conditions of a healthy node."""
    base = {"lastHeartbeatTime": now, "lastTransitionTime": now}
    return [
        {
            **base,
            "type": "Ready",
            "status": "True",
            "reason": "KubeletReady",
            "message": "kubelet is posting ready status",
        },
        {
            **base,
            "type": "MemoryPressure",
            "status": "False",
            "reason": "KubeletHasSufficientMemory",
            "message": "kubelet has sufficient memory",
        },
        {
            **base,
            "type": "DiskPressure",
            "status": "False",
            "reason": "KubeletHasNoDiskPressure",
            "message": "kubelet has no disk pressure",
        },
        {
            **base,
            "type": "PIDPressure",
            "status": "False",
            "reason": "KubeletHasSufficientPID",
            "message": "kubelet has sufficient PID",
        },
    ]


__all__ = ["DEMO_FLEET", "ApiError", "build_nodes", "load_fleet", "node_conditions", "pool_node"]
