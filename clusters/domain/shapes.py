"""The shape of a Ray cluster request: its validation rules and what it asks for.

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

from django.conf import settings
from django.core.exceptions import ValidationError

from clusters.domain.environment import validate_env

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


def _as_spec(flavor: Any) -> FlavorSpec:
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
    spec = _as_spec(flavor)
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
    spec = _as_spec(flavor)
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


def validate_request(
    *,
    tenant: Any,
    flavor: Any,
    kind: str,
    workers: int,
    min_workers: int | None,
    max_workers: int | None,
    gpu_fraction: Decimal | None,
    ttl_hours: int | None,
    name: str | None,
    image: str | None,
    kai_enabled: bool,
    image_allowlist: Sequence[str] | None = None,
    kueue: bool = False,
    env: Any = None,
    container_gpus: bool = False,
    container_profile: str | None = None,
) -> None:
    """Refuse a cluster request whose shape is wrong or can never fit, saying why.

    Pure: it reads only its arguments (``tenant`` for its TTL policy, ``flavor`` as a
    row or :class:`FlavorSpec`) and raises ``ValidationError`` with one message per
    offending field. Per-user caps and quotas need queries and live with admission.
    ``image_allowlist`` defaults to ``settings.RAY_IMAGE_ALLOWLIST``; an empty ``image``
    means the default image. ``kueue`` (Kueue admits clusters) refuses autoscaling: Kueue
    admits a RayCluster at one fixed size and its webhook refuses the in-tree autoscaler
    (unless the cluster is an elastic job, an alpha feature gangway does not use).
    ``env`` is checked by :func:`clusters.domain.environment.validate_env` (every fault under
    ``env``); ``container_gpus`` by :func:`check_container_gpus`, with
    ``container_profile`` defaulting to ``settings.CONTAINER_GPUS_SECCOMP_PROFILE``.
    """
    spec = _as_spec(flavor)
    errors: dict[str, str] = {}
    if name:
        try:
            validate_name(name)
        except ValidationError as exc:
            errors.update({k: v[0] for k, v in exc.message_dict.items()})
    if kind not in ("dev", "prod"):
        errors["kind"] = "Choose 'dev' or 'prod'."
    elif kind == "dev":
        _check_dev(errors, spec, workers, min_workers, max_workers)
    else:
        _check_prod(errors, spec, workers, min_workers, max_workers)
        if kueue and "max_workers" not in errors and "min_workers" not in errors:
            _check_kueue_fixed_size(errors, workers, min_workers, max_workers)
    if gpu_fraction is not None:
        _check_fraction(errors, spec, kind, gpu_fraction, kai_enabled)
    low, high = ttl_hours_range(tenant)
    if ttl_hours is not None and not low <= ttl_hours <= high:
        errors["ttl_hours"] = ttl_hours_message(tenant)
    faults = _payload_faults(
        tenant=tenant,
        gpu_fraction=gpu_fraction,
        image=image,
        image_allowlist=image_allowlist,
        env=env,
        container_gpus=container_gpus,
        container_profile=container_profile,
        mig_profile=spec.mig_profile,
    )
    if errors or faults:
        raise ValidationError({**{k: [v] for k, v in errors.items()}, **faults})


def _payload_faults(
    *,
    tenant: Any,
    gpu_fraction: Decimal | None,
    image: str | None,
    image_allowlist: Sequence[str] | None,
    env: Any,
    container_gpus: bool,
    container_profile: str | None,
    mig_profile: str = "",
) -> dict[str, list[str]]:
    """The faults of what the pods run: the image, ``env`` and ``container_gpus``."""
    faults: dict[str, list[str]] = {}
    if image:
        allowed = list(settings.RAY_IMAGE_ALLOWLIST if image_allowlist is None else image_allowlist)
        if image not in allowed:
            faults["image"] = [image_refusal(image, allowed)]
    _, env_faults = validate_env(env)
    if env_faults:
        faults["env"] = env_faults
    if container_gpus:
        profile = (
            settings.CONTAINER_GPUS_SECCOMP_PROFILE
            if container_profile is None
            else container_profile
        )
        why = container_gpus_refusal(
            gpu_fraction=gpu_fraction,
            pod_security=str(getattr(tenant, "pod_security", "baseline")),
            seccomp_profile=profile,
            mig_profile=mig_profile,
        )
        if why:
            faults["container_gpus"] = [why]
    return faults


def image_refusal(image: str, allowed: Sequence[str]) -> str:
    """Why ``image`` may not be used: it is not on the allow-list (which is named)."""
    return (
        f"Image {image!r} is not allowed: it is not on the allow-list (RAY_IMAGE_ALLOWLIST); "
        f"use one of: {', '.join(allowed)}."
    )


def container_gpus_refusal(
    *, gpu_fraction: Decimal | None, pod_security: str, seccomp_profile: str, mig_profile: str = ""
) -> str:
    """Why a request may not opt in to containers that see the pod's GPUs, or ``""``.

    The opt-in gives each GPU worker an init container that writes a CDI spec of the
    pod's own GPUs, and lets the Ray container run rootless podman: that needs the
    SETUID and SETGID capabilities, privilege escalation (newuidmap is setuid) and a
    seccomp profile that allows user namespaces and mounts, installed on the nodes by
    the platform (docs/containers.md). Pod Security ``restricted`` forbids the first
    two; a fractional worker has no GPU of its own to describe, and the spec describes
    whole GPUs (from their UUIDs), not a MIG partition (``mig_profile``).
    """
    if gpu_fraction is not None:
        return (
            "Containers with GPUs need whole GPUs: a fractional worker shares a device "
            "that no CDI spec of its own can describe."
        )
    if mig_profile:
        return (
            f"Containers with GPUs need whole GPUs: the CDI spec gangway writes describes "
            f"whole GPUs, not a MIG partition ({mig_profile}); use a flavor of whole GPUs "
            "(extended resource or DRA), or leave container_gpus off."
        )
    if not seccomp_profile:
        return (
            "Containers in Ray pods are not enabled on this platform: it needs a seccomp "
            "profile that allows rootless podman on the GPU nodes "
            "(CONTAINER_GPUS_SECCOMP_PROFILE; see docs/containers.md)."
        )
    if pod_security == "restricted":
        return (
            "This tenant's namespace enforces Pod Security 'restricted', which forbids "
            "what rootless podman needs (the SETUID and SETGID capabilities and privilege "
            "escalation for newuidmap); ask a platform admin for 'baseline', or leave "
            "container_gpus off."
        )
    return ""


def _check_dev(
    errors: dict[str, str],
    spec: FlavorSpec,
    workers: int,
    min_workers: int | None,
    max_workers: int | None,
) -> None:
    if not 1 <= workers <= DEV_MAX_WORKERS:
        errors["workers"] = f"A dev cluster has 1 to {DEV_MAX_WORKERS} workers."
    elif spec.node_count and workers > spec.gpus_per_node * spec.node_count:
        errors["workers"] = (
            f"{workers} single-GPU workers: the fleet has only "
            f"{spec.gpus_per_node * spec.node_count} {spec.name} GPUs, so this can never fit."
        )
    # Dev clusters do not autoscale: a fixed gang is what per-user GPU caps count.
    if min_workers is not None:
        errors["min_workers"] = "Autoscaling is for production clusters; leave it out for dev."
    if max_workers is not None:
        errors["max_workers"] = "Autoscaling is for production clusters; leave it out for dev."


def _check_prod(
    errors: dict[str, str],
    spec: FlavorSpec,
    workers: int,
    min_workers: int | None,
    max_workers: int | None,
) -> None:
    if workers < 1:
        errors["workers"] = "A production cluster has at least one worker."
        return
    replicas, low, high = replica_bounds(
        kind="prod", workers=workers, min_workers=min_workers, max_workers=max_workers
    )
    if low > high:
        errors["min_workers"] = f"min_workers ({low}) is above max_workers ({high})."
    elif not low <= replicas <= high:
        field = "min_workers" if low > replicas else "max_workers"
        errors[field] = f"Need min_workers ({low}) <= workers ({replicas}) <= max_workers ({high})."
    elif spec.node_count and high > spec.node_count:
        field = "max_workers" if max_workers is not None else "workers"
        errors[field] = (
            f"{high} whole-node workers: the fleet has only {spec.node_count} {spec.name} "
            f"nodes ({spec.gpus_per_node} GPUs each), so this can never fit."
        )


def _check_kueue_fixed_size(
    errors: dict[str, str], workers: int, min_workers: int | None, max_workers: int | None
) -> None:
    _, low, high = replica_bounds(
        kind="prod", workers=workers, min_workers=min_workers, max_workers=max_workers
    )
    if low != high:
        field = "max_workers" if max_workers is not None else "min_workers"
        errors[field] = (
            "Autoscaling is not available here: Kueue admits a Ray cluster at one fixed "
            "size. Leave min_workers and max_workers out and set workers to the size you need."
        )


def _check_fraction(
    errors: dict[str, str], spec: FlavorSpec, kind: str, fraction: Decimal, kai_enabled: bool
) -> None:
    if kind != "dev":
        errors["gpu_fraction"] = (
            "Fractional GPUs are for dev clusters only (they are not isolated)."
        )
    elif not spec.sharing:
        errors["gpu_fraction"] = f"Flavor {spec.name!r} does not allow GPU sharing."
    elif not kai_enabled:
        errors["gpu_fraction"] = "Fractional GPUs need the KAI scheduler, which is not enabled."
    elif not Decimal(0) < fraction < Decimal(1):
        errors["gpu_fraction"] = "A GPU fraction is strictly between 0 and 1."


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
