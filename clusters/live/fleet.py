"""Reads for the platform's pages: the fleet's capacity per flavor and per node, fair
share per cohort, and why each waiting request stands where it does.

Capacity per flavor comes from the database (the catalogue, what admission charges, the
reconciler's last observation); per node it comes from Kubernetes, through the gateway
production uses (one LIST of nodes and one of pods), kept :data:`NODES_CACHE_SECONDS` in
Django's cache so that pages polling every few seconds do not each ask the API server.
Fair share and the order notes read the dry-run's recorded pass
(:func:`clusters.queue.dry_run_cache.recorded_snapshot`): the numbers the queue is ordered by.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from decimal import Decimal
from functools import partial
from typing import Any

from django.core.cache import cache
from django.db.models import Count, Sum

from clusters.admission.explain import order_notes
from clusters.admission.fairshare import CohortShare, fair_share
from clusters.domain.states import State
from clusters.kube import labels
from clusters.kube.connection import gateway_for
from clusters.kube.gateway import Gateway, KubeError, get_gateway
from clusters.models import ClusterRequest, FlavorStock, KubeCluster
from clusters.queue import free_capacity, free_devices
from clusters.queue.dry_run_cache import recorded_snapshot
from tenants.models import GpuFlavor, Quota

log = logging.getLogger(__name__)

NODES_CACHE_KEY = "gangway:fleet:nodes"
DRA_API = "resource.k8s.io/v1"
NODES_CACHE_SECONDS = 5
# The stylesheet's colours for tenants' segments of a bar (``seg-0`` ...).
TENANT_COLOURS = 6


def _percent(part: Any, whole: Any) -> int:
    return min(100, round(100 * float(part) / float(whole))) if whole else 0


@dataclass(frozen=True)
class MemberStock:
    """A flavor in one member: the nodes the admin lists there and, when recent, what
    the member's last reconcile pass saw free (``None``: nothing recent)."""

    member: str
    node_count: int
    max_node_count: int | None
    observed_free_gpus: int | None
    observed_free_nodes: int | None
    observed_nodes: int | None


def _member_stock(stock: FlavorStock) -> MemberStock:
    fresh = stock.observed_at is not None and free_capacity.recent(stock.observed_at)
    return MemberStock(
        member=stock.kube_cluster.name,
        node_count=stock.node_count,
        max_node_count=stock.max_node_count,
        observed_free_gpus=stock.observed_free_gpus if fresh else None,
        observed_free_nodes=stock.observed_free_nodes if fresh else None,
        observed_nodes=stock.observed_nodes if fresh else None,
    )


def stock_by_member() -> dict[int, list[MemberStock]]:
    """Each flavor's stock in each member of the fleet (by flavor id, members in
    placement order), in one query: the per-member side of :func:`capacity_by_flavor`."""
    stock: dict[int, list[MemberStock]] = defaultdict(list)
    for row in FlavorStock.objects.select_related("kube_cluster").order_by(
        "kube_cluster__placement_order", "kube_cluster__name"
    ):
        stock[row.flavor_id].append(_member_stock(row))
    return dict(stock)


@dataclass
class FlavorCapacity:
    """One flavor: the catalogue's nodes and GPUs, what admission has handed out, the
    reconciler's last observation (``None``: none recent), and the waiting demand."""

    flavor: GpuFlavor
    allocated: Decimal
    waiting: Decimal
    waiting_requests: int
    held: list[dict[str, Any]] = field(default_factory=list)
    observed_free_gpus: int | None = None
    observed_free_nodes: int | None = None
    members: list[MemberStock] = field(default_factory=list)  # a fleet's, per member

    @property
    def total(self) -> int:
        return self.flavor.total_gpus

    @property
    def free(self) -> Decimal:
        return max(Decimal(self.total) - self.allocated, Decimal(0))

    @property
    def free_percent(self) -> int:
        return _percent(self.free, self.total)

    @property
    def whole_nodes_free(self) -> int:
        """Nodes with every GPU free: as observed when recent, else what the free GPUs
        would fill at best."""
        if self.observed_free_nodes is not None:
            return self.observed_free_nodes
        return int(self.free // self.flavor.gpus_per_node)


def capacity_by_flavor() -> list[FlavorCapacity]:
    """Every flavor with GPUs held per tenant and waiting demand: three queries whatever
    the number of flavors, tenants and requests.

    ``held`` is ``{"tenant", "gpus", "percent", "colour"}`` per tenant (of the flavor's GPUs), most
    first. Waiting demand is the GPUs of queued requests (not on hold) whose first
    preference is the flavor.
    """
    flavors = list(GpuFlavor.objects.all())
    held: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for row in (
        ClusterRequest.objects.unscoped()
        .filter(holds_gpus=True)
        .values("flavor_id", "tenant__slug")
        .annotate(gpus=Sum("gpus"))
        .order_by("flavor_id", "-gpus", "tenant__slug")
    ):
        held[row["flavor_id"]].append({"tenant": row["tenant__slug"], "gpus": row["gpus"]})
    waiting = {
        row["flavor_id"]: row
        for row in ClusterRequest.objects.unscoped()
        .filter(state=State.QUEUED, held_at__isnull=True)
        .values("flavor_id")
        .annotate(gpus=Sum("gpus"), n=Count("id"))
        .order_by("flavor_id")
    }
    # A tenant keeps its colour from one flavor's bar to the next.
    tenants = sorted({row["tenant"] for rows in held.values() for row in rows})
    colour = {slug: i % TENANT_COLOURS for i, slug in enumerate(tenants)}
    out = []
    for flavor in flavors:
        rows = held[flavor.pk]
        for row in rows:
            row["percent"] = _percent(row["gpus"], flavor.total_gpus)
            row["colour"] = colour[row["tenant"]]
        fresh = free_capacity.fresh(flavor)
        out.append(
            FlavorCapacity(
                flavor=flavor,
                allocated=sum((r["gpus"] for r in rows), Decimal(0)),
                waiting=waiting.get(flavor.pk, {}).get("gpus") or Decimal(0),
                waiting_requests=waiting.get(flavor.pk, {}).get("n") or 0,
                held=rows,
                observed_free_gpus=flavor.observed_free_gpus if fresh else None,
                observed_free_nodes=flavor.observed_free_nodes if fresh else None,
            )
        )
    return out


@dataclass(frozen=True)
class NodeRow:
    """A node for the grid: its use and the clusters on it as ``tenant/name``, and the
    member of the fleet it belongs to ("" without registered members)."""

    name: str
    flavor: str
    ready: bool
    allocatable: int
    used: int
    free: int
    percent: int
    clusters: tuple[str, ...]
    others: int
    member: str = ""
    # A node whose GPUs a DRA driver publishes, and those in use: whole, or how many
    # of their partitions.
    dra: bool = False
    devices: tuple[str, ...] = ()


@dataclass(frozen=True)
class DomainRow:
    """One domain of a level of a flavor's topology (a rack, a block): its whole nodes
    free (ready, no GPU in use) of its nodes, in one member of the fleet."""

    flavor: str
    level: str
    domain: str
    free: int
    nodes: int
    member: str = ""


@dataclass(frozen=True)
class NodeGrid:
    """The nodes of every flavor in every member, or why none could be read (``error``);
    ``unreachable``: what each member that could not be read said (the others' nodes
    are shown)."""

    nodes: tuple[NodeRow, ...] = ()
    error: str = ""
    unreachable: tuple[str, ...] = ()
    domains: tuple[DomainRow, ...] = ()

    @property
    def members(self) -> bool:
        """Whether the nodes come from several members (the page then names each one's)."""
        return len({n.member for n in self.nodes}) > 1

    @property
    def dra(self) -> bool:
        """Whether any node's GPUs are DRA devices (the page then lists those in use)."""
        return any(n.dra for n in self.nodes)


def _read_nodes(*, dra: bool) -> list[tuple[str, list[free_capacity.NodeUse], str]]:
    """Each member's GPU nodes (name, nodes, error), read one member after the other:
    a page reads them at most every :data:`NODES_CACHE_SECONDS`. With ``dra`` (a flavor
    uses DRA) the devices drivers publish and the claims holding them are read too."""
    members = list(KubeCluster.objects.all())
    if not members:
        return [("", *_read_member_nodes(get_gateway, dra=dra))]
    return [(m.name, *_read_member_nodes(partial(gateway_for, m), dra=dra)) for m in members]


def _read_member_nodes(
    gateway_of: Callable[[], Gateway], *, dra: bool
) -> tuple[list[free_capacity.NodeUse], str]:
    try:
        gateway = gateway_of()  # its credentials may not load: a message, not an error
        nodes = gateway.list("v1", "Node")
        pods = gateway.list("v1", "Pod")
        slices = gateway.list_if_served(DRA_API, "ResourceSlice") if dra else []
        claims = gateway.list_if_served(DRA_API, "ResourceClaim") if dra else []
    except KubeError as exc:
        log.warning("capacity page: %s", exc.message)
        return [], f"Kubernetes could not be reached ({exc.message}); try again shortly."
    uses = free_capacity.node_use(nodes, pods, id_label=labels.CLUSTER_ID)
    node_labels = {
        n["metadata"]["name"]: tuple(sorted((n["metadata"].get("labels") or {}).items()))
        for n in nodes
    }
    uses = [replace(use, labels=node_labels.get(use.name, ())) for use in uses]
    gpus: dict[str, list[free_devices.GpuUse]] = defaultdict(list)
    for gpu in free_devices.gpu_use(slices, claims):
        gpus[gpu.node].append(gpu)
    # A DRA node's GPUs are its published devices: whole GPUs, used when not free.
    return [
        replace(
            use,
            allocatable=len(gpus[use.name]),
            used=sum(1 for g in gpus[use.name] if not g.free),
            gpus=tuple(gpus[use.name]),
        )
        if use.dra
        else use
        for use in uses
    ], ""


def node_grid() -> NodeGrid:
    """Every GPU node with its GPUs used and free and the clusters on it, read from
    Kubernetes at most once per :data:`NODES_CACHE_SECONDS` (an unreachable API server
    too: a page says so instead of failing). One query names the clusters."""
    flavors = list(GpuFlavor.objects.all())
    cached = cache.get(NODES_CACHE_KEY)
    if cached is None:
        cached = _read_nodes(dra=any(f.uses_dra for f in flavors))
        cache.set(NODES_CACHE_KEY, cached, NODES_CACHE_SECONDS)
    errors = [(member, error) for member, _, error in cached if error]
    if len(errors) == len(cached):
        return NodeGrid(error="; ".join(error for _, error in errors))
    unreachable = tuple(f"{member}: {error}" for member, error in errors)
    uses = [(member, use) for member, found, _ in cached for use in found]
    ids = {pk for _, use in uses for pk in use.workloads}
    names = {
        pk: f"{slug}/{name}"
        for pk, slug, name in ClusterRequest.objects.unscoped()
        .filter(pk__in=ids)
        .values_list("pk", "tenant__slug", "name")
    }
    # A product's nodes are its extended-resource flavors' or, DRA-managed, its DRA ones'.
    flavor_of: dict[tuple[str, bool], list[str]] = defaultdict(list)
    for f in flavors:
        flavor_of[f.gpu_product, f.uses_dra].append(f.name)
    return NodeGrid(
        nodes=tuple(
            NodeRow(
                name=use.name,
                flavor=", ".join(flavor_of.get((use.product, use.dra)) or [use.product]),
                ready=use.ready,
                allocatable=use.allocatable,
                used=use.used,
                free=use.free,
                percent=_percent(use.used, use.allocatable),
                clusters=tuple(names.get(pk, f"request {pk}") for pk in use.workloads),
                others=use.others,
                member=member,
                dra=use.dra,
                devices=tuple(f"{g.device}: {g.summary}" for g in use.gpus if g.held or not g.free),
            )
            for member, use in uses
        ),
        unreachable=unreachable,
        domains=_domains(flavors, flavor_of, uses),
    )


def _domains(
    flavors: list[GpuFlavor],
    flavor_of: dict[tuple[str, bool], list[str]],
    uses: list[tuple[str, free_capacity.NodeUse]],
) -> tuple[DomainRow, ...]:
    """Whole nodes free per domain of each level of every flavor with a topology
    (docs/topology.md), member by member, domains in name order."""
    out: list[DomainRow] = []
    for f in flavors:
        for level in f.topology or []:
            tally: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
            for member, use in uses:
                value = dict(use.labels).get(level)
                if value is None or f.name not in flavor_of.get((use.product, use.dra), []):
                    continue
                counts = tally[member, value]
                counts[1] += 1
                counts[0] += int(use.ready and use.used == 0 and use.allocatable > 0)
            out += [
                DomainRow(f.name, level, value, free, total, member)
                for (member, value), (free, total) in sorted(tally.items())
            ]
    return tuple(out)


def fair_share_by_cohort() -> list[CohortShare]:
    """Every cohort's tenants with nominal, used, borrowed and lent GPUs per flavor, their
    weights and weighted dominant shares, from the admission core's own ledger."""
    snapshot, recorded = recorded_snapshot()
    lend_limits = {
        (slug, flavor): limit
        for slug, flavor, limit in Quota.objects.unscoped().values_list(
            "tenant__slug", "flavor__name", "lend_limit"
        )
    }
    return fair_share(snapshot, lend_limits=lend_limits, waiting_pools=recorded.pool_of)


def queue_notes(*, viewer: str | None = None) -> dict[int, str]:
    """Why each waiting request comes after the request of another tenant ahead of it,
    by request id; ``viewer``: the tenant whose page it is (others go unnamed)."""
    _, recorded = recorded_snapshot()
    return order_notes(recorded, viewer=viewer)
