"""Fixtures for the cluster tests: unsaved cluster requests of every shape."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from clusters.models import ClusterRequest


@pytest.fixture
def make_cluster(acme: Any, bob: Any, h100: Any) -> Any:
    """``make_cluster(**fields)``: an unsaved request in acme by bob (dev, one h100 worker)."""

    def build(**fields: Any) -> ClusterRequest:
        values: dict[str, Any] = {
            "tenant": acme,
            "owner": bob,
            "flavor": h100,
            "name": "bob-dev-a1b2c",
            "kind": "dev",
            "workers": 1,
        }
        values.update(fields)
        if "gpu_fraction" in values and values["gpu_fraction"] is not None:
            values["gpu_fraction"] = Decimal(str(values["gpu_fraction"]))
        return ClusterRequest(**values)

    return build


@pytest.fixture
def shapes_by_name(make_cluster: Any, alice: Any, l4: Any) -> dict[str, tuple[Any, dict[str, Any]]]:
    """Every cluster shape we generate, with the keyword arguments of ``raycluster``."""
    return {
        "dev": (make_cluster(), {}),
        "dev-3-workers": (make_cluster(name="bob-dev-three", workers=3), {}),
        "prod-fixed": (make_cluster(owner=alice, name="train", kind="prod", workers=2), {}),
        "prod-autoscaling": (
            make_cluster(
                owner=alice, name="serve", kind="prod", workers=1, min_workers=0, max_workers=4
            ),
            {},
        ),
        "fractional": (
            make_cluster(name="bob-frac", flavor=l4, gpu_fraction="0.5"),
            {"kai_enabled": True},
        ),
        "dev-kueue": (make_cluster(), {"queue_mode": "kueue"}),
        # Kueue admits fixed sizes only (its webhook refuses the in-tree autoscaler).
        "prod-kueue": (
            make_cluster(owner=alice, name="train", kind="prod", workers=2),
            {"queue_mode": "kueue"},
        ),
    }
