"""Shape validation: the rules of both kinds, refused with a message on the right field."""

from __future__ import annotations

from decimal import Decimal
from types import SimpleNamespace
from typing import Any

import pytest
from django.core.exceptions import ValidationError

from clusters.domain import shapes

TENANT = SimpleNamespace(dev_ttl_hours=8, max_ttl_hours=72)
H100 = shapes.FlavorSpec("h100", "NVIDIA-H100-80GB-HBM3", 8, 192, 1800, False, node_count=4)
L4 = shapes.FlavorSpec("l4", "NVIDIA-L4", 1, 16, 64, True, node_count=4)
ALLOW = ["rayproject/ray:2.49.2-py311-gpu"]


def check(**overrides: Any) -> None:
    args: dict[str, Any] = {
        "tenant": TENANT,
        "flavor": H100,
        "kind": "dev",
        "workers": 1,
        "min_workers": None,
        "max_workers": None,
        "gpu_fraction": None,
        "ttl_hours": None,
        "name": "bob-dev",
        "image": None,
        "kai_enabled": False,
        "image_allowlist": ALLOW,
    }
    args.update(overrides)
    shapes.validate_request(**args)


def refused(**overrides: Any) -> dict[str, list[str]]:
    with pytest.raises(ValidationError) as info:
        check(**overrides)
    return info.value.message_dict


def test_good_requests_pass() -> None:
    check()
    check(workers=16, flavor=shapes.FlavorSpec("h100", "P", 8, 192, 1800, False))
    check(kind="prod", workers=2, min_workers=1, max_workers=4)
    check(kind="prod", workers=4)
    check(flavor=L4, gpu_fraction=Decimal("0.5"), kai_enabled=True)
    check(ttl_hours=72, image=ALLOW[0])


@pytest.mark.parametrize(
    ("overrides", "field", "words"),
    [
        ({"workers": 0}, "workers", "1 to 16"),
        ({"workers": 17}, "workers", "1 to 16"),
        # 12 single-GPU workers on a fleet of 4 one-GPU nodes: more GPUs than exist.
        ({"flavor": L4, "workers": 12}, "workers", "never fit"),
        ({"min_workers": 1}, "min_workers", "production"),
        (
            {"kind": "prod", "workers": 3, "min_workers": 5, "max_workers": 2},
            "min_workers",
            "above",
        ),
        ({"kind": "prod", "workers": 3, "min_workers": 4}, "min_workers", "above"),
        ({"kind": "prod", "workers": 5}, "workers", "only 4"),
        ({"kind": "prod", "workers": 2, "max_workers": 9}, "max_workers", "never fit"),
        ({"kind": "prod", "workers": 0}, "workers", "at least one"),
        ({"gpu_fraction": Decimal("0.5"), "kai_enabled": True}, "gpu_fraction", "sharing"),
        ({"flavor": L4, "gpu_fraction": Decimal("0.5")}, "gpu_fraction", "KAI"),
        (
            {"flavor": L4, "kind": "prod", "gpu_fraction": Decimal("0.5"), "kai_enabled": True},
            "gpu_fraction",
            "dev clusters only",
        ),
        ({"flavor": L4, "gpu_fraction": Decimal("1"), "kai_enabled": True}, "gpu_fraction", "0"),
        ({"ttl_hours": 73}, "ttl_hours", "72"),
        ({"image": "evil/miner:latest"}, "image", "not allowed"),
        ({"name": "Bob"}, "name", "lowercase"),
        ({"name": "9lives"}, "name", "starting with a letter"),
        ({"name": "x" * 54}, "name", "53"),
        ({"name": "a_b"}, "name", "lowercase"),
        ({"kind": "huge"}, "kind", "dev"),
    ],
)
def test_bad_requests_are_refused_with_a_message(
    overrides: dict[str, Any], field: str, words: str
) -> None:
    errors = refused(**overrides)
    assert field in errors, errors
    assert words in errors[field][0]


def test_all_errors_at_once() -> None:
    errors = refused(name="Bad", workers=99, ttl_hours=999)
    assert set(errors) == {"name", "workers", "ttl_hours"}


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


def test_kueue_admits_fixed_sizes_only() -> None:
    message = refused(kind="prod", workers=1, max_workers=4, kueue=True)["max_workers"][0]
    assert "Kueue" in message
    assert "Kueue" in refused(kind="prod", workers=2, min_workers=1, kueue=True)["min_workers"][0]
    check(kind="prod", workers=2, kueue=True)
    check(kind="prod", workers=2, min_workers=2, max_workers=2, kueue=True)
    check(kind="prod", workers=1, max_workers=4)


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
