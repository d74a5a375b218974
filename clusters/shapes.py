"""The shape of a Ray cluster request: its validation rules and what it asks for.

This module is pure (no database, no I/O): the API, the dashboard, the dry-run and the
admission pass all call it, so a rule is written once. A *dev* cluster has one group
of single-GPU workers (or fractional ones, where the flavor allows sharing and KAI is
on); a *prod* cluster has one worker per whole GPU node, optionally autoscaling between
``min_workers`` and ``max_workers``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import ROUND_FLOOR, Decimal

from django.core.exceptions import ValidationError

# Ray head: no GPU, modest CPU and memory; runs on a CPU node.
HEAD_CPU = Decimal("2")
HEAD_MEMORY_GIB = Decimal("8")
# What a production worker leaves to the node's system daemons and the kubelet.
NODE_RESERVE_CPU = Decimal("2")
NODE_RESERVE_MEMORY_GIB = Decimal("8")
MAX_NAME_LENGTH = 53  # KubeRay: the RayCluster name prefixes pod and service names.
NAME_RE = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")  # DNS-1035 label


@dataclass(frozen=True)
class FlavorSpec:
    """The catalogue facts a shape needs about one GPU flavor."""

    name: str
    gpu_product: str
    gpus_per_node: int
    cpu_per_node: int
    memory_per_node_gib: int
    sharing: bool


@dataclass(frozen=True)
class WorkerResources:
    """What one worker pod requests (and limits)."""

    gpus: int
    gpu_fraction: Decimal | None
    cpu: Decimal
    memory_gib: Decimal


@dataclass(frozen=True)
class Demand:
    """What the whole gang (head and all workers at ``workers``) requests."""

    gpus: Decimal
    cpu: Decimal
    memory_gib: Decimal


def _floor(value: Decimal, step: str) -> Decimal:
    quantum = Decimal(step)
    return (value / quantum).to_integral_value(rounding=ROUND_FLOOR) * quantum


def worker_resources(
    *, kind: str, flavor: FlavorSpec, gpu_fraction: Decimal | None
) -> WorkerResources:
    """Per-worker resources: a proportional node slice for dev, the whole node for prod."""
    if kind == "prod":
        return WorkerResources(
            gpus=flavor.gpus_per_node,
            gpu_fraction=None,
            cpu=Decimal(flavor.cpu_per_node) - NODE_RESERVE_CPU,
            memory_gib=Decimal(flavor.memory_per_node_gib) - NODE_RESERVE_MEMORY_GIB,
        )
    per_gpu_cpu = _floor(Decimal(flavor.cpu_per_node) / flavor.gpus_per_node, "0.5")
    per_gpu_mem = _floor(Decimal(flavor.memory_per_node_gib) / flavor.gpus_per_node, "1")
    if kind == "dev" and flavor.gpus_per_node == 1:
        # A single-GPU node: leave the same reserve a prod worker leaves.
        per_gpu_cpu = Decimal(flavor.cpu_per_node) - NODE_RESERVE_CPU
        per_gpu_mem = Decimal(flavor.memory_per_node_gib) - NODE_RESERVE_MEMORY_GIB
    if gpu_fraction is not None:
        return WorkerResources(
            gpus=0,
            gpu_fraction=gpu_fraction,
            cpu=max(_floor(per_gpu_cpu * gpu_fraction, "0.5"), Decimal("0.5")),
            memory_gib=max(_floor(per_gpu_mem * gpu_fraction, "1"), Decimal("1")),
        )
    return WorkerResources(gpus=1, gpu_fraction=None, cpu=per_gpu_cpu, memory_gib=per_gpu_mem)


def demand(*, kind: str, flavor: FlavorSpec, workers: int, gpu_fraction: Decimal | None) -> Demand:
    """The gang's total request with ``workers`` workers (admission charges this)."""
    worker = worker_resources(kind=kind, flavor=flavor, gpu_fraction=gpu_fraction)
    gpus = Decimal(worker.gpus) * workers
    if worker.gpu_fraction is not None:
        gpus = worker.gpu_fraction * workers
    return Demand(
        gpus=gpus,
        cpu=HEAD_CPU + worker.cpu * workers,
        memory_gib=HEAD_MEMORY_GIB + worker.memory_gib * workers,
    )


def validate_name(name: str) -> None:
    """A RayCluster name: a DNS-1035 label of at most 53 characters."""
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
