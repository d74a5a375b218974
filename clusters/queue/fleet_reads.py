"""The fleet as the admission pass sees it: each member with what it has free per flavor.

A member's free figures come from its :class:`~clusters.models.FlavorStock` as the fleet's
come from the flavor (:func:`~clusters.queue.free_capacity.free_for_admission`, with the
same freshness rule), less what requests placed there hold, never above the fleet's own
figures. A flavor in one member only has the fleet's figures there; one no member lists
is offered on the member of ``settings.KUBECONFIG`` (the catalogue described that cluster
before the fleet had members).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from decimal import Decimal

from clusters import admission as adm
from clusters.models import FlavorStock, KubeCluster
from clusters.queue import free_capacity
from tenants.models import GpuFlavor

# What one flavor has free: GPUs and whole nodes (``None``: unknown).
Free = tuple[Decimal | None, int | None]


def member_names() -> dict[int, str]:
    """Every member's name by id (what the rows' ``kube_cluster_id`` point at)."""
    return dict(KubeCluster.objects.values_list("pk", "name"))


def _at_most(mine: Free, fleet: Free) -> Free:
    """A member's figures bounded by the fleet's (a member never has more than all)."""
    gpus, nodes = mine
    if fleet[0] is not None:
        gpus = fleet[0] if gpus is None else min(gpus, fleet[0])
    if fleet[1] is not None:
        nodes = fleet[1] if nodes is None else min(nodes, fleet[1])
    return gpus, nodes


def members(
    flavors: list[GpuFlavor],
    fleet_free: dict[str, Free],
    holding: Iterable[tuple[adm.Running, str, bool]],
) -> list[adm.MemberQ]:
    """The members in placement order with their stock. ``holding`` is every request that
    holds GPUs: (its pure view, the member it is placed on, whether its pods may not be
    bound yet)."""
    clusters = list(KubeCluster.objects.prefetch_related("allowed_tenants"))
    if not clusters:
        return []
    by_pk = {f.pk: f for f in flavors}
    held: dict[tuple[str, str], Decimal] = defaultdict(Decimal)
    unplaced: dict[tuple[str, str], Decimal] = defaultdict(Decimal)
    unplaced_nodes: dict[tuple[str, str], int] = defaultdict(int)
    for r, member, not_bound in holding:
        held[member, r.flavor] += r.gpus
        if not_bound:
            unplaced[member, r.flavor] += r.gpus
            unplaced_nodes[member, r.flavor] += r.nodes
    names = {c.pk: c.name for c in clusters}
    listing: dict[str, list[FlavorStock]] = defaultdict(list)
    for row in FlavorStock.objects.filter(kube_cluster__in=clusters):
        if row.flavor_id in by_pk:
            listing[by_pk[row.flavor_id].name].append(row)
    home = next((c for c in clusters if c.from_settings), clusters[0])
    stock: dict[str, dict[str, adm.StockQ]] = defaultdict(dict)
    for flavor in flavors:
        rows = listing.get(flavor.name, [])
        if len(rows) < 2:
            # In one member only (or none listed: the settings' cluster): the fleet's
            # figures are that member's.
            member = names[rows[0].kube_cluster_id] if rows else home.name
            gpus, nodes = fleet_free[flavor.name]
            stock[member][flavor.name] = adm.StockQ(
                flavor.name, flavor.most_nodes, free_gpus=gpus, free_nodes=nodes
            )
            continue
        for row in rows:
            member = names[row.kube_cluster_id]
            key = (member, flavor.name)
            figures = free_capacity.free_for_admission(
                flavor,
                held=held[key],
                unplaced=unplaced[key],
                unplaced_nodes=unplaced_nodes[key],
                stock=row,
            )
            gpus, nodes = _at_most(figures, fleet_free[flavor.name])
            stock[member][flavor.name] = adm.StockQ(
                flavor=flavor.name,
                node_count=max(row.node_count, row.max_node_count or 0),
                free_gpus=gpus,
                free_nodes=nodes,
            )
    return [
        adm.MemberQ(
            name=c.name,
            order=c.placement_order,
            region=c.region,
            schedulable=c.schedulable,
            reachable=c.reachable is not False,
            tenants=frozenset(t.slug for t in c.allowed_tenants.all()),
            stock=stock.get(c.name, {}),
        )
        for c in clusters
    ]
