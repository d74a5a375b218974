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
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from clusters import admission as adm
from clusters.models import FlavorStock, KubeCluster, MemberQuotaCap
from clusters.queue import free_capacity, free_domains
from tenants.models import GpuFlavor

# What one flavor has free: GPUs and whole nodes (``None``: unknown).
Free = tuple[Decimal | None, int | None]
# Its whole free nodes, each by its domains (``None``: unknown).
Nodes = tuple[tuple[str, ...], ...] | None


@dataclass
class Fleet:
    """The members as one query read them: each member's row (``rows``, placement order),
    its stock per flavor id, the slugs of the tenants allowed on it and its caps."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    stock: dict[int, dict[int, dict[str, Any]]] = field(default_factory=dict)
    allowed: dict[int, set[str]] = field(default_factory=dict)
    # The caps on tenants' quotas per member: (tenant slug, flavor name) -> GPUs.
    caps: dict[int, dict[tuple[str, str], int]] = field(default_factory=dict)

    @property
    def names(self) -> dict[int, str]:
        """Every member's name by id (what the rows' ``kube_cluster_id`` point at)."""
        return {row["pk"]: row["name"] for row in self.rows}


_MEMBER = ("pk", "name", "region", "placement_order", "schedulable", "reachable", "from_settings")
_STOCK = (
    "flavor_id",
    "node_count",
    "max_node_count",
    "observed_free_gpus",
    "observed_free_nodes",
    "observed_nodes",
    "observed_free_domains",
    "observed_at",
)


def read_fleet() -> Fleet:
    """Every member with its stock and allow-list, in one query: a row per (stock, allowed
    tenant) pair, few for a fleet of clusters (the pass reads it every time); and the
    caps on tenants' quotas per member, in a second."""
    fleet = Fleet()
    seen: set[int] = set()
    for values in KubeCluster.objects.values(
        *_MEMBER, *(f"stock__{f}" for f in _STOCK), "allowed_tenants__slug"
    ).order_by("placement_order", "name"):
        pk = values["pk"]
        if pk not in seen:
            seen.add(pk)
            fleet.rows.append({f: values[f] for f in _MEMBER})
            fleet.stock[pk] = {}
            fleet.allowed[pk] = set()
        if values["stock__flavor_id"] is not None:
            fleet.stock[pk][values["stock__flavor_id"]] = {f: values[f"stock__{f}"] for f in _STOCK}
        if values["allowed_tenants__slug"]:
            fleet.allowed[pk].add(values["allowed_tenants__slug"])
    if fleet.rows:
        # Apart from the members' query: joined there, caps would multiply its rows.
        for member, tenant, flavor, gpus in MemberQuotaCap.objects.values_list(
            "kube_cluster_id", "tenant__slug", "flavor__name", "gpus"
        ):
            fleet.caps.setdefault(member, {})[tenant, flavor] = gpus
    return fleet


def _at_most(mine: Free, fleet: Free) -> Free:
    """A member's figures bounded by the fleet's (a member never has more than all)."""
    gpus, nodes = mine
    if fleet[0] is not None:
        gpus = fleet[0] if gpus is None else min(gpus, fleet[0])
    if fleet[1] is not None:
        nodes = fleet[1] if nodes is None else min(nodes, fleet[1])
    return gpus, nodes


def free_domains_of(
    flavor: GpuFlavor,
    counts: GpuFlavor | FlavorStock,
    nodes_left: int | None,
    unplaced: Iterable[adm.Running],
) -> Nodes:
    """The whole free nodes of ``flavor`` by domain that the pass may hand out (on the
    fleet, or in one member when ``counts`` is its stock), when recently observed: less
    the nodes of admitted gangs whose pods may not be bound yet (``unplaced``), each in
    the domain it is pinned to when it is, and at most ``nodes_left``."""
    if not flavor.topology or not free_capacity.fresh(counts):
        return None
    gangs = [r for r in unplaced if r.flavor == flavor.name and r.nodes]
    return free_domains.for_admission(
        flavor,
        counts.observed_free_domains,
        nodes_left=nodes_left,
        pinned=[(r.topology_level, r.topology_domain, r.nodes) for r in gangs if r.topology_domain],
        unpinned=sum(r.nodes for r in gangs if not r.topology_domain),
    )


def members(
    fleet: Fleet,
    flavors: list[GpuFlavor],
    fleet_free: dict[str, Free],
    holding: Iterable[tuple[adm.Running, str, bool]],
    fleet_domains: dict[str, Nodes] | None = None,
) -> list[adm.MemberQ]:
    """The members in placement order with their stock. ``holding`` is every request that
    holds GPUs: (its pure view, the member it is placed on, whether its pods may not be
    bound yet); ``fleet_domains`` the fleet's whole free nodes by domain per flavor."""
    if not fleet.rows:
        return []
    held: dict[tuple[str, str], Decimal] = defaultdict(Decimal)
    unplaced: dict[tuple[str, str], Decimal] = defaultdict(Decimal)
    unplaced_nodes: dict[tuple[str, str], int] = defaultdict(int)
    unbound: dict[str, list[adm.Running]] = defaultdict(list)
    for r, member, not_bound in holding:
        held[member, r.flavor] += r.gpus
        if not_bound:
            unplaced[member, r.flavor] += r.gpus
            unplaced_nodes[member, r.flavor] += r.nodes
            unbound[member].append(r)
    home = next((row for row in fleet.rows if row["from_settings"]), fleet.rows[0])
    stock: dict[str, dict[str, adm.StockQ]] = defaultdict(dict)
    for flavor in flavors:
        listing = [
            (row["name"], FlavorStock(**fleet.stock[row["pk"]][flavor.pk]))
            for row in fleet.rows
            if flavor.pk in fleet.stock[row["pk"]]
        ]
        if len(listing) < 2:
            # In one member only (or none listed: the settings' cluster): the fleet's
            # figures are that member's.
            member = listing[0][0] if listing else home["name"]
            gpus, nodes = fleet_free[flavor.name]
            stock[member][flavor.name] = adm.StockQ(
                flavor.name,
                flavor.most_nodes,
                free_gpus=gpus,
                free_nodes=nodes,
                free_node_domains=(fleet_domains or {}).get(flavor.name),
            )
            continue
        for member, row in listing:
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
                free_node_domains=free_domains_of(flavor, row, nodes, unbound[member]),
            )
    return [
        adm.MemberQ(
            name=row["name"],
            order=row["placement_order"],
            region=row["region"],
            schedulable=row["schedulable"],
            reachable=row["reachable"] is not False,
            tenants=frozenset(fleet.allowed[row["pk"]]),
            stock=stock.get(row["name"], {}),
            caps=fleet.caps.get(row["pk"], {}),
        )
        for row in fleet.rows
    ]
