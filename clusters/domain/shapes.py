"""The shape of a Ray cluster request: what it asks for (workers, worker groups, their
resources, its demand), its name and TTL; the rules it must pass are
:mod:`clusters.domain.request_validation`.

This module is pure (no database, no I/O): the API, the dashboard, the dry-run and the
admission pass all call it, so a rule is written once. A *dev* cluster has one group
of single-GPU workers (or fractional ones, where the flavor allows sharing and KAI is
on); a *prod* cluster has one worker per whole GPU node, optionally autoscaling between
``min_workers`` and ``max_workers``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import ROUND_FLOOR, Decimal
from typing import Any

from django.core.exceptions import ValidationError

# Ray head: no GPU, modest CPU and memory; runs on a CPU node.
HEAD_CPU = Decimal("2")
HEAD_MEMORY_GIB = Decimal("8")
# The in-tree autoscaler, a sidecar KubeRay adds to an autoscaling cluster's head pod.
AUTOSCALER_CPU = Decimal("0.5")
AUTOSCALER_MEMORY_GIB = Decimal("0.5")
# What a production worker leaves to the node's system daemons and the kubelet.
NODE_RESERVE_CPU = Decimal("2")
NODE_RESERVE_MEMORY_GIB = Decimal("8")
MAX_NAME_LENGTH = 53  # KubeRay: the RayCluster name prefixes pod and service names.
DNS_LABEL_PATTERN = r"[a-z]([-a-z0-9]*[a-z0-9])?"  # DNS-1035 label (also the URL lookup)
NAME_RE = re.compile(rf"^{DNS_LABEL_PATTERN}$")
# Worker group names become Kueue pod-set names: lowercase RFC 1123 labels.
GROUP_NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
# Kueue: a Workload holds at most 18 pod sets, and the head is one of them.
MAX_WORKER_GROUPS = 17
DEV_MAX_WORKERS = 16  # a dev cluster is a workbench, not a training job
CPU_STEP = "0.001"  # a millicore
MEM_STEP = "0.001"  # a thousandth of a GiB (the model stores three decimals)
MIN_MEMORY_GIB = Decimal("0.001")
# The most hours any TTL or extension may name: a year. Both the API's serializers and the
# dashboard's forms build their fields from these bounds, and the services check again.
MIN_HOURS = 1
MAX_HOURS = 24 * 365
EXTEND_HOURS_MESSAGE = f"Extend by a whole number of hours from {MIN_HOURS} to {MAX_HOURS}."


@dataclass(frozen=True)
class FlavorSpec:
    """The catalogue facts a shape needs about one GPU flavor."""

    name: str
    gpu_product: str
    gpus_per_node: int
    cpu_per_node: int
    memory_per_node_gib: int
    sharing: bool
    node_count: int = 0  # 0: unknown (no "can it ever fit" check against the fleet size)
    # DRA flavors (tenants.models.DeviceMode): the DeviceClass workers claim from and the
    # CEL selectors a device must match; "" and () for the nvidia.com/gpu extended resource.
    device_class: str = ""
    device_selectors: tuple[str, ...] = ()
    mig_profile: str = ""

    @property
    def uses_dra(self) -> bool:
        """Whether workers claim their GPUs through a ResourceClaimTemplate."""
        return bool(self.device_class)


@dataclass(frozen=True)
class WorkerResources:
    """What one worker pod requests (and limits)."""

    gpus: int
    gpu_fraction: Decimal | None
    cpu: Decimal
    memory_gib: Decimal


@dataclass(frozen=True)
class Demand:
    """What the whole gang requests at its largest size (head and :func:`charged_workers`
    workers): what admission charges against quotas, the cohort and the fleet."""

    gpus: Decimal
    cpu: Decimal
    memory_gib: Decimal


def floor_to(value: Decimal, step: str) -> Decimal:
    """Round ``value`` down to a multiple of ``step`` (e.g. ``"0.001"``)."""
    quantum = Decimal(step)
    return (value / quantum).to_integral_value(rounding=ROUND_FLOOR) * quantum


def node_reserve(flavor: FlavorSpec) -> tuple[Decimal, Decimal]:
    """CPU and memory (GiB) left on a GPU node for the kubelet and system daemons.

    The fixed reserve, but never more than a quarter of the node, so that a tiny flavor
    still leaves its worker something to run on.
    """
    cpu = min(NODE_RESERVE_CPU, floor_to(Decimal(flavor.cpu_per_node) / 4, CPU_STEP))
    memory = min(
        NODE_RESERVE_MEMORY_GIB, floor_to(Decimal(flavor.memory_per_node_gib) / 4, MEM_STEP)
    )
    return cpu, memory


def worker_resources(
    *, kind: str, flavor: FlavorSpec, gpu_fraction: Decimal | None
) -> WorkerResources:
    """Per-worker resources: a proportional node slice for dev, the whole node for prod.

    Production: all the node's GPUs, its allocatable CPU and memory less
    :func:`node_reserve`. Dev: one GPU and ``node / gpus_per_node`` of CPU and memory,
    floored to a millicore and a thousandth of a GiB so that ``gpus_per_node`` dev
    workers always fit on one node; on a single-GPU node the slice is the node less the
    reserve. A fractional dev worker gets the same fraction of the one-GPU slice (at least
    a millicore and a MiB, so no container asks for nothing).
    """
    reserve_cpu, reserve_mem = node_reserve(flavor)
    if kind == "prod":
        return WorkerResources(
            gpus=flavor.gpus_per_node,
            gpu_fraction=None,
            cpu=Decimal(flavor.cpu_per_node) - reserve_cpu,
            memory_gib=Decimal(flavor.memory_per_node_gib) - reserve_mem,
        )
    if flavor.gpus_per_node == 1:
        per_gpu_cpu = Decimal(flavor.cpu_per_node) - reserve_cpu
        per_gpu_mem = Decimal(flavor.memory_per_node_gib) - reserve_mem
    else:
        per_gpu_cpu = floor_to(Decimal(flavor.cpu_per_node) / flavor.gpus_per_node, CPU_STEP)
        per_gpu_mem = floor_to(Decimal(flavor.memory_per_node_gib) / flavor.gpus_per_node, MEM_STEP)
    if gpu_fraction is not None:
        return WorkerResources(
            gpus=0,
            gpu_fraction=gpu_fraction,
            cpu=max(floor_to(per_gpu_cpu * gpu_fraction, CPU_STEP), Decimal(CPU_STEP)),
            memory_gib=max(floor_to(per_gpu_mem * gpu_fraction, MEM_STEP), MIN_MEMORY_GIB),
        )
    return WorkerResources(gpus=1, gpu_fraction=None, cpu=per_gpu_cpu, memory_gib=per_gpu_mem)


def charged_workers(
    *,
    kind: str,
    workers: int,
    min_workers: int | None = None,
    max_workers: int | None = None,
    guaranteed: bool = False,
) -> int:
    """How many workers a request is charged for: the most it may ever run (an
    autoscaling production cluster may grow to ``max_workers`` unasked, so it is charged
    that and never grows past its quota, the cohort or the fleet); ``guaranteed``: its
    guaranteed size (``min_workers``), for a request whose growth is admitted apart."""
    _, low, high = replica_bounds(
        kind=kind, workers=workers, min_workers=min_workers, max_workers=max_workers
    )
    return low if guaranteed else high


def demand(
    *,
    kind: str,
    flavor: FlavorSpec,
    workers: int,
    gpu_fraction: Decimal | None,
    min_workers: int | None = None,
    max_workers: int | None = None,
    guaranteed: bool = False,
) -> Demand:
    """The gang's total request at its largest size (admission charges this), or at its
    guaranteed size (``guaranteed``, :func:`charged_workers`).

    Every place that counts a request against quotas, the cohort or the fleet (the row's
    ``gpus``/``cpu``/``memory_gib``, the admission pass, the dry-run) reads it from here:
    the head (with the autoscaler's sidecar when it autoscales) and every worker it may
    ever run.
    """
    _, low, high = replica_bounds(
        kind=kind, workers=workers, min_workers=min_workers, max_workers=max_workers
    )
    count = low if guaranteed else high
    worker = worker_resources(kind=kind, flavor=flavor, gpu_fraction=gpu_fraction)
    gpus = Decimal(worker.gpus) * count
    if worker.gpu_fraction is not None:
        gpus = worker.gpu_fraction * count
    head_cpu, head_memory = HEAD_CPU, HEAD_MEMORY_GIB
    if low != high:
        head_cpu, head_memory = head_cpu + AUTOSCALER_CPU, head_memory + AUTOSCALER_MEMORY_GIB
    return Demand(
        gpus=gpus,
        cpu=head_cpu + worker.cpu * count,
        memory_gib=head_memory + worker.memory_gib * count,
    )


# Names that are path segments of the clusters API (``clusters/dry-run/``) and of the
# dashboard (``clusters/new/``), so a cluster can never shadow them.
RESERVED_NAMES = frozenset({"dry-run", "new"})


def validate_name(name: str) -> None:
    """A RayCluster name: a DNS-1035 label of at most 53 characters, not a reserved word."""
    if name in RESERVED_NAMES:
        raise ValidationError({"name": f"{name!r} is reserved; choose another name."})
    if len(name) > MAX_NAME_LENGTH:
        raise ValidationError(
            {"name": f"At most {MAX_NAME_LENGTH} characters (KubeRay prefixes pod names with it)."}
        )
    if not NAME_RE.match(name):
        raise ValidationError(
            {
                "name": "Use lowercase letters, digits and hyphens, starting with a letter "
                "and ending with a letter or digit."
            }
        )


def flavor_spec(flavor: Any) -> FlavorSpec:
    """The :class:`FlavorSpec` of a ``GpuFlavor`` row (or anything with the same fields)."""
    return FlavorSpec(
        name=str(flavor.name),
        gpu_product=str(flavor.gpu_product),
        gpus_per_node=int(flavor.gpus_per_node),
        cpu_per_node=int(flavor.cpu_per_node),
        memory_per_node_gib=int(flavor.memory_per_node_gib),
        sharing=bool(flavor.sharing),
        # What can ever fit is judged against the node group at its largest.
        node_count=int(
            getattr(flavor, "most_nodes", None) or getattr(flavor, "node_count", 0) or 0
        ),
        device_class=str(getattr(flavor, "dra_device_class", "") or ""),
        device_selectors=tuple(getattr(flavor, "dra_selectors", None) or ()),
        mig_profile=str(getattr(flavor, "mig_profile", "") or ""),
    )


def as_flavor_spec(flavor: Any) -> FlavorSpec:
    """``flavor`` as a :class:`FlavorSpec`: a spec as it is, a row through :func:`flavor_spec`."""
    return flavor if isinstance(flavor, FlavorSpec) else flavor_spec(flavor)


@dataclass(frozen=True)
class WorkerGroup:
    """One KubeRay worker group: its name, its replica bounds and what each worker asks for.

    Our shapes have exactly one group, but the manifest builder takes a list so that the
    operator's group rules (:func:`validate_worker_groups`) are checked in one place.
    """

    name: str
    replicas: int
    min_replicas: int
    max_replicas: int
    resources: WorkerResources

    @property
    def autoscaling(self) -> bool:
        return self.min_replicas != self.max_replicas


def replica_bounds(
    *, kind: str, workers: int, min_workers: int | None, max_workers: int | None
) -> tuple[int, int, int]:
    """``(replicas, min, max)``: fixed at ``workers`` unless a prod cluster autoscales.

    A bound left out defaults to ``workers``, so ``max_workers`` alone means "start at
    ``workers``, grow up to ``max_workers``, never shrink below the start".
    """
    if kind != "prod":
        return workers, workers, workers
    low = workers if min_workers is None else min_workers
    high = workers if max_workers is None else max_workers
    return workers, low, high


def group_name(flavor: FlavorSpec) -> str:
    """The worker group's name: ``<flavor>-workers`` (a lowercase DNS label)."""
    return f"{flavor.name}-workers"


def worker_groups(
    *,
    kind: str,
    flavor: Any,
    workers: int,
    min_workers: int | None = None,
    max_workers: int | None = None,
    gpu_fraction: Decimal | None = None,
) -> list[WorkerGroup]:
    """The worker groups of a shape (one group, for now)."""
    spec = as_flavor_spec(flavor)
    replicas, low, high = replica_bounds(
        kind=kind, workers=workers, min_workers=min_workers, max_workers=max_workers
    )
    return [
        WorkerGroup(
            name=group_name(spec),
            replicas=replicas,
            min_replicas=low,
            max_replicas=high,
            resources=worker_resources(kind=kind, flavor=spec, gpu_fraction=gpu_fraction),
        )
    ]


def validate_worker_groups(groups: Sequence[WorkerGroup], *, flavor: Any) -> None:
    """KubeRay's and Kueue's rules for worker groups, which the CRD schema does not carry.

    At least one and at most 17 groups (Kueue: 18 pod sets with the head); names are
    unique lowercase DNS labels and never ``head``; ``min <= replicas <= max``; and one
    worker never asks for more than one node of the flavor holds (it could never be
    scheduled, and would wait forever).
    """
    spec = as_flavor_spec(flavor)
    errors: list[str] = []
    if not groups:
        errors.append("A cluster needs at least one worker group.")
    if len(groups) > MAX_WORKER_GROUPS:
        errors.append(
            f"{len(groups)} worker groups: at most {MAX_WORKER_GROUPS} (Kueue admits a "
            "Ray cluster as at most 18 pod sets, the head included)."
        )
    seen: set[str] = set()
    for group in groups:
        if not GROUP_NAME_RE.match(group.name):
            errors.append(f"Worker group name {group.name!r} is not a lowercase DNS label.")
        if group.name == "head":
            errors.append("A worker group may not be called 'head'.")
        if group.name in seen:
            errors.append(f"Worker group name {group.name!r} is used twice.")
        seen.add(group.name)
        if not 0 <= group.min_replicas <= group.replicas <= group.max_replicas:
            errors.append(
                f"Worker group {group.name!r}: need min ({group.min_replicas}) <= replicas "
                f"({group.replicas}) <= max ({group.max_replicas})."
            )
        res = group.resources
        if res.gpus > spec.gpus_per_node:
            errors.append(
                f"Worker group {group.name!r}: {res.gpus} GPUs per worker, but a "
                f"{spec.name} node has {spec.gpus_per_node}."
            )
        if res.cpu > spec.cpu_per_node or res.memory_gib > spec.memory_per_node_gib:
            errors.append(
                f"Worker group {group.name!r}: a worker asks for more CPU or memory than a "
                f"{spec.name} node has."
            )
    if errors:
        raise ValidationError({"worker_groups": errors})


def validate_extend_hours(hours: Any) -> int:
    """An extension's hours, a whole number from 1 to :data:`MAX_HOURS` (a year): the
    API's and the dashboard's one rule (the service checks the tenant's maximum)."""
    if isinstance(hours, bool) or not isinstance(hours, int) or not MIN_HOURS <= hours <= MAX_HOURS:
        raise ValidationError({"hours": EXTEND_HOURS_MESSAGE})
    return int(hours)


def ttl_hours_range(tenant: Any) -> tuple[int, int]:
    """The whole-hour TTLs a request in ``tenant`` may ask for (service, form, verdict)."""
    return MIN_HOURS, int(tenant.max_ttl_hours)


def ttl_hours_message(tenant: Any) -> str:
    """Why a TTL outside :func:`ttl_hours_range` is refused."""
    low, high = ttl_hours_range(tenant)
    return f"A whole number of hours from {low} to {high} (the tenant's maximum TTL)."


def resolve_ttl_hours(*, tenant: Any, kind: str, ttl_hours: int | None) -> int | None:
    """The TTL a request gets: the tenant's dev default for dev (idle GPUs are the first
    complaint); none for prod unless asked (it serves long-running work)."""
    if ttl_hours is not None:
        return ttl_hours
    return int(tenant.dev_ttl_hours) if kind == "dev" else None


def sanitize_name_part(value: str) -> str:
    """Lowercase ``value`` and keep it to letters, digits and single hyphens."""
    cleaned = re.sub(r"[^a-z0-9]+", "-", value.lower()).strip("-")
    return cleaned or "user"


def default_name(*, owner_username: str, kind: str, suffix: str) -> str:
    """``<owner>-<kind>-<suffix>`` as a valid RayCluster name (the service picks ``suffix``)."""
    tail = f"-{kind}-{sanitize_name_part(suffix)}"
    head = sanitize_name_part(owner_username)[: MAX_NAME_LENGTH - len(tail)].strip("-")
    if not head or not head[0].isalpha():
        head = f"u{head}"[: MAX_NAME_LENGTH - len(tail)].strip("-")
    return f"{head}{tail}"
