"""Where each flavor's whole free nodes are: their labels at every level of its topology.

The reconciler lists nodes and pods each pass; for a flavor with a topology
(docs/topology.md) it writes, beside the free GPU and node counts, how many whole free
nodes each combination of domains has (``observed_free_domains``). The admission pass
reads it back as :attr:`~clusters.admission.FlavorQ.free_node_domains`, less the nodes
admitted gangs will still take, so that a gang that requires one domain is admitted
only where one domain holds it (:mod:`clusters.admission.topology_room`).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from typing import Any

from django.db import transaction
from django.utils import timezone

from clusters.admission.topology_room import FreeNodes, Node
from clusters.kube.quantities import GPU, GPU_PRODUCT_LABEL
from clusters.models import FlavorStock, KubeCluster
from clusters.queue.free_capacity import FRESH_FOR, locked_flavor_ids, pod_gpus
from clusters.queue.free_devices import dra_managed, node_ready
from tenants.models import GpuFlavor

# What one observation holds: {"levels": [...], "nodes": [[[value per level], count]],
# "largest": {level: the most nodes of the product one domain of it has, free or not}}.
Observed = dict[str, Any]


def _gpus(value: Any) -> int:
    try:
        return int(str(value or "0"))
    except ValueError:
        return 0


def free_domains_by_flavor(
    flavors: Iterable[GpuFlavor], nodes: list[dict[str, Any]], pods: list[dict[str, Any]]
) -> dict[str, Observed]:
    """For each flavor with a topology (extended-resource GPUs: a DRA flavor's nodes are
    shared by its profiles, so none of them is whole), its whole free nodes by domain:
    ready nodes of its product whose bound pods request none of their GPUs."""
    topologies = {f.name: tuple(f.topology or ()) for f in flavors if f.topology and not f.uses_dra}
    if not topologies:
        return {}
    products = {f.name: f.gpu_product for f in flavors if f.name in topologies}
    used: dict[str, int] = defaultdict(int)
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if node:
            used[node] += pod_gpus(pod)
    free: dict[str, list[dict[str, str]]] = defaultdict(list)
    # Every ready node of a product, free or not: how big a domain can ever be.
    every: dict[str, list[dict[str, str]]] = defaultdict(list)
    for node in nodes:
        meta = node.get("metadata") or {}
        labels = meta.get("labels") or {}
        product = labels.get(GPU_PRODUCT_LABEL)
        allocatable = _gpus(((node.get("status") or {}).get("allocatable") or {}).get(GPU))
        if product and allocatable and node_ready(node) and not dra_managed(node):
            every[product].append(labels)
            if not used[meta.get("name", "")]:
                free[product].append(labels)
    out: dict[str, Observed] = {}
    for name, levels in topologies.items():
        tally = Counter(
            tuple(labels.get(level, "") for level in levels) for labels in free[products[name]]
        )
        out[name] = {
            "levels": list(levels),
            "nodes": [[list(node), n] for node, n in sorted(tally.items())],
            "largest": largest_domains(levels, every[products[name]]),
        }
    return out


def largest_domains(levels: Iterable[str], nodes: list[dict[str, str]]) -> dict[str, int]:
    """For each level, the most of ``nodes`` (their labels) that one domain of it holds:
    a gang that requires more workers than that in one domain can never start."""
    out: dict[str, int] = {}
    for level in levels:
        sizes = Counter(labels[level] for labels in nodes if labels.get(level))
        out[level] = max(sizes.values(), default=0)
    return out


def record(
    domains: dict[str, Observed],
    *,
    flavors: list[GpuFlavor],
    member: KubeCluster | None = None,
) -> None:
    """Write one cluster's observation beside its free counts (which
    :func:`clusters.queue.free_capacity.record` has just written): on the flavors, or on
    the member's stock and then, merged over the members' recent stocks, on the
    flavors. Only flavors with a topology are written."""
    with_levels = [f for f in flavors if f.topology or f.observed_free_domains]
    if not with_levels:
        return
    if member is None:
        for f in with_levels:
            GpuFlavor.objects.filter(pk=f.pk).update(observed_free_domains=domains.get(f.name))
        return
    for f in with_levels:
        FlavorStock.objects.filter(kube_cluster=member, flavor=f).update(
            observed_free_domains=domains.get(f.name)
        )
    recent = timezone.now() - FRESH_FOR
    with transaction.atomic():
        locked_flavor_ids()
        seen: dict[int, list[Observed | None]] = defaultdict(list)
        for flavor_id, observed in FlavorStock.objects.filter(
            flavor__in=with_levels, observed_at__gte=recent
        ).values_list("flavor_id", "observed_free_domains"):
            seen[flavor_id].append(observed)
        for f in with_levels:
            GpuFlavor.objects.filter(pk=f.pk).update(observed_free_domains=merged(seen[f.pk]))


def merged(observations: Iterable[Observed | None]) -> Observed | None:
    """The members' observations of one flavor as one (the fleet's), or ``None`` when
    there is none or they were made with different levels."""
    levels: list[str] | None = None
    tally: Counter[tuple[str, ...]] = Counter()
    # A gang never spans members: the fleet's largest domain is its members' largest.
    largest: dict[str, int] = {}
    for seen in observations:
        if not seen:
            continue
        if levels is not None and seen.get("levels") != levels:
            return None
        levels = list(seen.get("levels") or [])
        for node, n in seen.get("nodes") or []:
            tally[tuple(node)] += n
        for level, n in (seen.get("largest") or {}).items():
            largest[level] = max(largest.get(level, 0), int(n))
    if levels is None:
        return None
    return {
        "levels": levels,
        "nodes": [[list(node), n] for node, n in sorted(tally.items())],
        "largest": largest,
    }


def for_admission(
    flavor: GpuFlavor,
    seen: Observed | None,
    *,
    nodes_left: int | None,
    pinned: Iterable[tuple[str, str, int]] = (),
    unpinned: int = 0,
) -> tuple[Node, ...] | None:
    """The whole free nodes the pass may hand out, each by its domains: the observation
    (``None`` if absent, or made before the flavor's levels changed) less what admitted
    gangs whose pods are not bound yet will take: ``pinned`` (level, domain, nodes) in
    their domain, ``unpinned`` nodes anywhere (charged where that leaves the least
    room, never more than there is), and at most ``nodes_left``, the pass's whole free
    nodes."""
    levels = tuple(flavor.topology or ())
    if not seen or not levels or tuple(seen.get("levels") or ()) != levels:
        return None
    room = FreeNodes(
        levels,
        (tuple(node) for node, n in seen.get("nodes") or [] for _ in range(int(n))),
    )
    for level, domain, count in pinned:
        if level in levels and domain:
            room.take(level, domain, count)
        else:
            room.take_anywhere(count)
    room.take_anywhere(unpinned)
    if nodes_left is not None:
        room.shrink_to(nodes_left)
    return tuple(sorted(room.nodes.elements()))
