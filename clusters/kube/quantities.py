"""Kubernetes resource quantities from the Decimals the shapes compute.

Kubernetes accepts many spellings of a quantity; we always write the same one for the
same number (``"12"``, ``"500m"``, ``"216Gi"``, ``"512Mi"``) so that manifests are
byte-identical from run to run and a golden-file diff shows real changes only.
"""

from __future__ import annotations

from decimal import ROUND_FLOOR, Decimal

# The extended resource NVIDIA's device plugin advertises, and the node label naming the
# GPU model (GPU feature discovery); what manifests request and capacity reads.
GPU = "nvidia.com/gpu"
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"


def cpu(value: Decimal | int) -> str:
    """Whole cores as ``"12"``, anything finer in millicores (``"12500m"``)."""
    amount = Decimal(value)
    if amount == amount.to_integral_value():
        return str(int(amount))
    millis = (amount * 1000).to_integral_value(rounding=ROUND_FLOOR)
    return f"{int(millis)}m"


def memory_gib(value: Decimal | int) -> str:
    """Whole GiB as ``"216Gi"``, anything finer in whole MiB (rounded down)."""
    amount = Decimal(value)
    if amount == amount.to_integral_value():
        return f"{int(amount)}Gi"
    mib = (amount * 1024).to_integral_value(rounding=ROUND_FLOOR)
    return f"{int(mib)}Mi"


def count(value: Decimal | int) -> str:
    """A plain count (GPUs, pods, objects) as a quantity string."""
    return str(int(value))


def number(value: Decimal | float | int) -> str:
    """A decimal without exponent or trailing zeros (``"1.5"``, ``"2"``), e.g. a weight."""
    amount = Decimal(str(value)).normalize()
    text = format(amount, "f")
    return text
