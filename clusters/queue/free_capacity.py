"""What each cluster can still place, per GPU flavor, from its nodes and bound pods.

The reconciler already lists every pod each pass; with one more LIST (nodes) it knows,
for each ``nvidia.com/gpu.product``, how many GPUs no bound pod requests and how many
nodes have all their GPUs free. Those figures are written on the flavor rows, and the
admission pass uses them while they are fresh (capacity awareness): it then refuses to
admit what the cluster cannot place, and says so with the ``capacity`` reason instead of
leaving pods Pending behind an "admitted" label.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db import transaction
from django.db.models import Sum
from django.utils import timezone

from clusters.admission.snapshot import CAPACITY
from clusters.domain.states import State
from clusters.kube.quantities import GPU, GPU_PRODUCT_LABEL
from clusters.models import ClusterRequest, FlavorStock, KubeCluster
from clusters.queue.free_devices import Free, GpuUse, dra_managed, node_ready
from tenants.models import GpuFlavor

PRODUCT_LABEL = GPU_PRODUCT_LABEL
# Figures older than this are ignored (the reconciler may be down).
FRESH_FOR = timedelta(minutes=2)


def _gpus(value: Any) -> int:
    try:
        return int(str(value or "0"))
    except ValueError:
        return 0


def pod_gpus(pod: dict[str, Any]) -> int:
    """GPUs a pod takes from its node (none once it has ended)."""
    phase = (pod.get("status") or {}).get("phase")
    if phase in ("Succeeded", "Failed"):
        return 0
    gpus = 0
    for container in (pod.get("spec") or {}).get("containers") or []:
        requests = (container.get("resources") or {}).get("requests") or {}
        limits = (container.get("resources") or {}).get("limits") or {}
        gpus += _gpus(requests.get(GPU, limits.get(GPU)))
    if (pod.get("metadata") or {}).get("annotations", {}).get("gpu-fraction"):
        gpus += 1  # a shared GPU is taken whole from the node's pool
    return gpus


def free_by_product(nodes: list[dict[str, Any]], pods: list[dict[str, Any]]) -> dict[str, Free]:
    """Free GPUs and free nodes per product, from node allocatable minus bound pods."""
    used: dict[str, int] = defaultdict(int)
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if node:
            used[node] += pod_gpus(pod)
    free_gpus: dict[str, int] = defaultdict(int)
    free_nodes: dict[str, int] = defaultdict(int)
    seen: dict[str, int] = defaultdict(int)
    for node in nodes:
        product = ((node.get("metadata") or {}).get("labels") or {}).get(PRODUCT_LABEL)
        if not product or not node_ready(node) or dra_managed(node):
            continue
        allocatable = _gpus(((node.get("status") or {}).get("allocatable") or {}).get(GPU))
        left = max(allocatable - used[node["metadata"]["name"]], 0)
        free_gpus[product] += left
        free_nodes[product] += 1 if allocatable and left == allocatable else 0
        seen[product] += 1
    return {p: Free(free_gpus[p], free_nodes[p], seen[p]) for p in free_gpus}


@dataclass(frozen=True)
class NodeUse:
    """One GPU node as the API server lists it: its product, GPUs allocatable and taken
    by bound pods, and the managed clusters with pods on it (``workloads``: their
    ``gangway.dev/cluster-id`` labels; ``others``: GPUs of pods gangway does not manage)."""

    name: str
    product: str
    ready: bool
    allocatable: int
    used: int
    workloads: tuple[int, ...]
    others: int
    # A node whose GPUs a DRA driver publishes (:func:`dra_managed`): its whole GPUs,
    # each with its partitions in use, once the slices are read (clusters.live.fleet).
    dra: bool = False
    gpus: tuple[GpuUse, ...] = ()
    # Its labels, for the capacity page's topology domains (clusters.live.fleet).
    labels: tuple[tuple[str, str], ...] = ()

    @property
    def free(self) -> int:
        return max(self.allocatable - self.used, 0)


def node_use(
    nodes: list[dict[str, Any]], pods: list[dict[str, Any]], *, id_label: str
) -> list[NodeUse]:
    """Every node with a GPU product label, by name, with what its bound pods take and
    which requests (``id_label`` of managed pods) run there."""
    used: dict[str, int] = defaultdict(int)
    others: dict[str, int] = defaultdict(int)
    workloads: dict[str, set[int]] = defaultdict(set)
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        gpus = pod_gpus(pod)
        # A pod that claims DRA devices takes no nvidia.com/gpu, yet runs on the GPUs.
        claims = (pod.get("spec") or {}).get("resourceClaims")
        if not node or not (gpus or claims):
            continue
        used[node] += gpus
        request_id = ((pod.get("metadata") or {}).get("labels") or {}).get(id_label, "")
        if request_id.isdigit():
            workloads[node].add(int(request_id))
        else:
            others[node] += gpus
    out = []
    for node in nodes:
        meta = node.get("metadata") or {}
        product = (meta.get("labels") or {}).get(PRODUCT_LABEL)
        if not product:
            continue
        name = meta.get("name", "")
        out.append(
            NodeUse(
                name=name,
                product=product,
                ready=node_ready(node),
                allocatable=_gpus(((node.get("status") or {}).get("allocatable") or {}).get(GPU)),
                used=used[name],
                workloads=tuple(sorted(workloads[name])),
                others=others[name],
                dra=dra_managed(node),
            )
        )
    return sorted(out, key=lambda n: n.name)


def _seen(flavor: GpuFlavor, free: dict[str, Free], devices: dict[str, Free]) -> Free:
    """What was observed of one flavor: its product's extended-resource GPUs, or a DRA
    flavor's devices (:mod:`clusters.queue.free_devices`)."""
    if flavor.uses_dra:
        return devices.get(flavor.name, Free(0, 0))
    return free.get(flavor.gpu_product, Free(0, 0))


def record(
    free: dict[str, Free],
    *,
    member: KubeCluster | None = None,
    devices: dict[str, Free] | None = None,
    flavors: list[GpuFlavor] | None = None,
) -> bool:
    """Write one cluster's observation (a product absent there: 0 free, no nodes);
    returns whether any flavor has more free GPUs or nodes there than last observed.
    ``free`` is by product (extended-resource flavors), ``devices`` by flavor name (DRA
    flavors: free devices of their class and profile); ``flavors``: the catalogue, when
    the caller has read it.

    Without ``member`` (no fleet registered) it is written on the flavors; with one, on
    the flavor's stock in that member, and the flavor's figures become the fleet's
    totals: the sums over the members whose observation is recent (an unreachable
    member's GPUs cannot be placed on)."""
    devices = devices or {}
    flavors = list(GpuFlavor.objects.all()) if flavors is None else flavors
    if member is None:
        return _record_on_flavors(free, devices, flavors)
    now = timezone.now()
    grew = False
    stocks = {s.flavor_id: s for s in FlavorStock.objects.filter(kube_cluster=member)}
    written = []
    for flavor in flavors:
        seen = _seen(flavor, free, devices)
        stock = stocks.get(flavor.pk)
        if stock is None and not seen.seen:
            continue  # the flavor has no nodes there, and never had
        grew = grew or (
            stock is None
            or stock.observed_free_gpus is None
            or seen.gpus > stock.observed_free_gpus
            or seen.nodes > (stock.observed_free_nodes or 0)
        )
        written.append(
            FlavorStock(
                kube_cluster=member,
                flavor=flavor,
                observed_free_gpus=seen.gpus,
                observed_free_nodes=seen.nodes,
                observed_nodes=seen.seen,
                observed_at=now,
            )
        )
    if written:  # one statement, whether the rows exist or not
        FlavorStock.objects.bulk_create(
            written,
            update_conflicts=True,
            unique_fields=["kube_cluster", "flavor"],
            update_fields=[
                "observed_free_gpus",
                "observed_free_nodes",
                "observed_nodes",
                "observed_at",
            ],
        )
    _sum_on_flavors(now)
    return grew


def _record_on_flavors(
    free: dict[str, Free], devices: dict[str, Free], flavors: list[GpuFlavor]
) -> bool:
    now = timezone.now()
    grew = False
    for flavor in flavors:
        seen = _seen(flavor, free, devices)
        grew = grew or (
            flavor.observed_free_gpus is None
            or seen.gpus > flavor.observed_free_gpus
            or seen.nodes > (flavor.observed_free_nodes or 0)
        )
        GpuFlavor.objects.filter(pk=flavor.pk).update(
            observed_free_gpus=seen.gpus,
            observed_free_nodes=seen.nodes,
            observed_nodes=seen.seen,
            observed_at=now,
        )
    return grew


def locked_flavor_ids() -> list[int]:
    """Lock every flavor's row for an update of its figures, in one order (inside the
    caller's transaction). FOR NO KEY UPDATE, not FOR UPDATE: a row inserted meanwhile
    that points at a flavor (a create, a usage span) checks its foreign key at commit
    with FOR KEY SHARE, which FOR UPDATE blocks; a create and a pass waiting for that
    create's rows would deadlock."""
    return list(
        GpuFlavor.objects.select_for_update(no_key=True).order_by("pk").values_list("pk", flat=True)
    )


def _sum_on_flavors(now: datetime) -> None:
    """Every flavor's observed figures: the sums of its recent stock rows. The flavors
    are locked first, so that members' passes sum one after the other and the last
    one's sums hold every member's latest observation."""
    with transaction.atomic():
        flavor_ids = locked_flavor_ids()
        totals = (
            FlavorStock.objects.filter(observed_at__gte=now - FRESH_FOR)
            .values("flavor_id")
            .annotate(
                gpus=Sum("observed_free_gpus"),
                nodes=Sum("observed_free_nodes"),
                seen=Sum("observed_nodes"),
            )
            .order_by("flavor_id")
        )
        found = {row["flavor_id"]: row for row in totals}
        for flavor_id in flavor_ids:
            row = found.get(flavor_id, {})
            GpuFlavor.objects.filter(pk=flavor_id).update(
                observed_free_gpus=row.get("gpus") or 0,
                observed_free_nodes=row.get("nodes") or 0,
                observed_nodes=row.get("seen") or 0,
                observed_at=now,
            )


def anyone_waiting() -> bool:
    """Whether a queued request waits for capacity (the ``capacity`` reason)."""
    return (
        ClusterRequest.objects.unscoped().filter(state=State.QUEUED, queue_reason=CAPACITY).exists()
    )


def fresh(flavor: GpuFlavor | FlavorStock) -> bool:
    """Whether the flavor's (or a member's stock's) observation is recent enough to act on."""
    return flavor.observed_at is not None and recent(flavor.observed_at)


def recent(observed_at: datetime) -> bool:
    """Whether an observation made at ``observed_at`` is recent enough to act on."""
    return timezone.now() - observed_at < FRESH_FOR


def free_for_admission(
    flavor: GpuFlavor,
    *,
    held: Decimal,
    unplaced: Decimal,
    unplaced_nodes: int,
    stock: FlavorStock | None = None,
) -> tuple[Decimal | None, int | None]:
    """Free GPUs and nodes the pass may hand out for a flavor (in one member of the fleet
    when ``stock`` is given: its nodes and observation instead of the fleet's, ``held``
    and ``unplaced`` what requests placed there take).

    Always bounded by the catalogue (its GPUs less what admitted clusters hold, an
    autoscaling cluster at its largest size). When the cluster was observed recently, also
    by what it reported free less what admitted clusters will still take but whose pods
    are not bound yet (``unplaced``). Whole free nodes never exceed what those GPUs fill:
    a node an autoscaling cluster may still grow onto looks free, but is not.
    """
    counts: GpuFlavor | FlavorStock = flavor if stock is None else stock
    if not counts.node_count:
        return None, None
    # A node group that can grow is bounded by its maximum here: the nodes it has now
    # bound it through what the cluster reports free.
    most_nodes = max(counts.node_count, counts.max_node_count or 0)
    gpus = max(Decimal(flavor.gpus_per_node * most_nodes) - held, Decimal(0))
    nodes: int | None = None
    if fresh(counts) and counts.observed_free_gpus is not None:
        gpus = max(min(gpus, Decimal(counts.observed_free_gpus) - unplaced), Decimal(0))
        nodes = max((counts.observed_free_nodes or 0) - unplaced_nodes, 0)
        nodes = min(nodes, int(gpus // flavor.gpus_per_node))
    return gpus, nodes
