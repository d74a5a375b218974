"""Request shapes: what workers and worker groups ask for, TTL defaults and names."""

from __future__ import annotations

from decimal import Decimal
from types import SimpleNamespace

import pytest
from django.core.exceptions import ValidationError

from clusters.domain import shapes

TENANT = SimpleNamespace(dev_ttl_hours=8, max_ttl_hours=72)
H100 = shapes.FlavorSpec("h100", "NVIDIA-H100-80GB-HBM3", 8, 192, 1800, False, node_count=4)
L4 = shapes.FlavorSpec("l4", "NVIDIA-L4", 1, 16, 64, True, node_count=4)


def test_worker_resources_and_demand() -> None:
    dev = shapes.worker_resources(kind="dev", flavor=H100, gpu_fraction=None)
    assert (dev.gpus, dev.cpu, dev.memory_gib) == (1, Decimal(24), Decimal(225))
    prod = shapes.worker_resources(kind="prod", flavor=H100, gpu_fraction=None)
    assert (prod.gpus, prod.cpu, prod.memory_gib) == (8, Decimal(190), Decimal(1792))
    single = shapes.worker_resources(kind="dev", flavor=L4, gpu_fraction=None)
    assert (single.cpu, single.memory_gib) == (Decimal(14), Decimal(56))
    half = shapes.worker_resources(kind="dev", flavor=L4, gpu_fraction=Decimal("0.5"))
    assert (half.gpus, half.cpu, half.memory_gib) == (0, Decimal(7), Decimal(28))
    total = shapes.demand(kind="prod", flavor=H100, workers=2, gpu_fraction=None)
    assert total == shapes.Demand(gpus=Decimal(16), cpu=Decimal(382), memory_gib=Decimal(3592))


@pytest.mark.parametrize(
    ("workers", "low", "high", "charged"),
    [(1, None, 4, 4), (1, 0, 4, 4), (3, 1, None, 3), (2, None, None, 2)],
)
def test_an_autoscaling_cluster_is_charged_for_its_largest_size(
    workers: int, low: int | None, high: int | None, charged: int
) -> None:
    """It may grow to max_workers without asking: that is what quotas must hold."""
    size = shapes.charged_workers(kind="prod", workers=workers, min_workers=low, max_workers=high)
    assert size == charged
    need = shapes.demand(
        kind="prod",
        flavor=H100,
        workers=workers,
        min_workers=low,
        max_workers=high,
        gpu_fraction=None,
    )
    fixed = shapes.demand(kind="prod", flavor=H100, workers=charged, gpu_fraction=None)
    sidecar = (Decimal("0.5"), Decimal("0.5")) if (low, high) != (None, None) else (0, 0)
    assert need.gpus == fixed.gpus == 8 * charged
    assert (need.cpu, need.memory_gib) == (fixed.cpu + sidecar[0], fixed.memory_gib + sidecar[1])


def test_worker_group_rules() -> None:
    (group,) = shapes.worker_groups(kind="prod", flavor=H100, workers=2, max_workers=3)
    assert (group.name, group.replicas, group.min_replicas, group.max_replicas) == (
        "h100-workers",
        2,
        2,
        3,
    )
    assert group.autoscaling
    shapes.validate_worker_groups([group], flavor=H100)
    too_big = shapes.WorkerGroup(
        "big", 1, 1, 1, shapes.WorkerResources(9, None, Decimal(1), Decimal(1))
    )
    with pytest.raises(ValidationError, match="9 GPUs per worker"):
        shapes.validate_worker_groups([too_big], flavor=H100)
    many = [shapes.WorkerGroup(f"g{i}", 1, 1, 1, group.resources) for i in range(18)]
    with pytest.raises(ValidationError, match="at most 17"):
        shapes.validate_worker_groups(many, flavor=H100)
    with pytest.raises(ValidationError, match="used twice"):
        shapes.validate_worker_groups([group, group], flavor=H100)


def test_ttl_defaults() -> None:
    assert shapes.resolve_ttl_hours(tenant=TENANT, kind="dev", ttl_hours=None) == 8
    assert shapes.resolve_ttl_hours(tenant=TENANT, kind="prod", ttl_hours=None) is None
    assert shapes.resolve_ttl_hours(tenant=TENANT, kind="prod", ttl_hours=5) == 5


def test_default_name() -> None:
    name = shapes.default_name(owner_username="Bob.Smith@Example.com", kind="dev", suffix="x1y2z")
    assert name == "bob-smith-example-com-dev-x1y2z"
    shapes.validate_name(name)
    long = shapes.default_name(owner_username="9" * 200, kind="prod", suffix="abcde")
    shapes.validate_name(long)
    assert len(long) <= 53


@pytest.mark.parametrize("name", ["dry-run", "new"])
def test_route_words_are_reserved_names(name: str) -> None:
    with pytest.raises(ValidationError) as caught:
        shapes.validate_name(name)
    assert "reserved" in caught.value.message_dict["name"][0]
