"""Kubernetes quantities: parsing and canonical formatting."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubesim import quantity


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("500m", Decimal("0.5")),
        ("2", Decimal(2)),
        ("8Gi", Decimal(8 * 2**30)),
        ("1.5", Decimal("1.5")),
        ("1e3", Decimal(1000)),
        ("128974848", Decimal(128974848)),
        ("129M", Decimal(129_000_000)),
        ("123Mi", Decimal(123 * 2**20)),
        ("100n", Decimal("1e-7")),
        ("1k", Decimal(1000)),
        (".5", Decimal("0.5")),
        (3, Decimal(3)),
    ],
)
def test_parse(text: str, value: Decimal) -> None:
    assert quantity.parse(text) == value


@pytest.mark.parametrize("bad", ["", "1.2.3", "5Gb", "abc", "1 Gi", True])
def test_parse_rejects(bad: object) -> None:
    with pytest.raises(quantity.QuantityError):
        quantity.parse(bad)


def test_scheduler_amounts_and_formatting() -> None:
    assert quantity.amount("cpu", "500m") == 500
    assert quantity.amount("requests.cpu", "2") == 2000
    assert quantity.amount("memory", "1Gi") == 2**30
    assert quantity.format_cpu(1500) == "1500m" and quantity.format_cpu(2000) == "2"
    assert quantity.format_memory(8 * 2**30) == "8Gi"
    assert quantity.format_memory(129_000_000) == "129000000"
    assert quantity.format_quantity(129_000_000) == "129M"
    assert quantity.format_resource("requests.nvidia.com/gpu", 8) == "8"


@given(st.integers(min_value=0, max_value=10**6))
def test_cpu_round_trip(millis: int) -> None:
    assert quantity.milli(quantity.format_cpu(millis)) == millis


@given(st.integers(min_value=0, max_value=2**50))
def test_memory_round_trip(n: int) -> None:
    assert quantity.whole(quantity.format_memory(n)) == n


def test_amounts_are_remembered_by_type_and_value() -> None:
    """``amount`` remembers what it parsed; ``True`` (which hashes as 1) stays no
    quantity after ``1`` was read, and a float is read as itself."""
    from kubesim.quantity import QuantityError, amount

    assert amount("cpu", 1) == 1000
    assert amount("cpu", "1") == 1000
    assert amount("memory", "8Gi") == 8 * 2**30
    with pytest.raises(QuantityError):
        amount("cpu", True)
    assert amount("cpu", 0.5) == 500
    with pytest.raises(QuantityError):
        amount("cpu", "1 core")
