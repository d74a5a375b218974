"""The typed create shape (clusters.rows.spec.ClusterSpec)."""

from __future__ import annotations

import dataclasses
from decimal import Decimal
from typing import Any

import pytest

from clusters.rows.spec import SHAPE_FIELDS, ClusterSpec


def test_from_data_drops_empty_values_and_keeps_zero(h100: Any) -> None:
    spec = ClusterSpec.from_data(
        {"flavor": h100, "kind": "prod", "workers": 0, "name": "", "ttl_hours": None, "x": 1}
    )
    assert (spec.kind, spec.workers, spec.name, spec.ttl_hours) == ("prod", 0, None, None)


def test_a_spec_is_immutable(h100: Any) -> None:
    spec = ClusterSpec(flavor=h100)
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.workers = 3  # type: ignore[misc]


def test_a_dev_alternative_drops_what_only_fits_the_asked_flavor(h100: Any, l4: Any) -> None:
    spec = ClusterSpec(flavor=l4, name="mine", gpu_fraction=Decimal("0.5"), ttl_hours=3)
    other = spec.on_flavor(h100)
    assert (other.flavor, other.name, other.gpu_fraction, other.ttl_hours) == (h100, None, None, 3)
    prod = ClusterSpec(flavor=l4, kind="prod", workers=1, max_workers=3).on_flavor(h100)
    assert prod.max_workers == 3


def test_a_row_gives_back_the_spec_it_was_built_from(make_cluster: Any, h100: Any) -> None:
    row = make_cluster(kind="prod", workers=1, max_workers=4, ttl_hours=5)
    spec = ClusterSpec.of(row)
    assert spec.shape() == {name: getattr(row, name) for name in SHAPE_FIELDS}
    assert (spec.charged_workers(), spec.worker_gpus()) == (4, Decimal(h100.gpus_per_node))
