"""Kubernetes resource quantities: parsing and canonical formatting.

A quantity is a decimal number with an optional suffix: binary (``Ki``..``Ei``), decimal
(``n``, ``u``, ``m``, ``k``, ``M``..``E``) or a decimal exponent (``1e3``). We hold values as
``Decimal`` so that ``500m`` + ``1.5`` adds up exactly, and format them back the way the API
server would print them (``1500m``, ``8Gi``, ``129M``).
"""

from __future__ import annotations

import functools
import re
from decimal import Decimal, InvalidOperation
from typing import Any

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}
_RE = re.compile(
    r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"((?:[KMGTPE]i)|[numkMGTPE]|(?:[eE][+-]?[0-9]+))?$"
)


class QuantityError(ValueError):
    """Raised for a string that is not a Kubernetes quantity."""


def parse(value: Any) -> Decimal:
    """Parse a quantity (string, int or float) into an exact ``Decimal``."""
    if isinstance(value, bool):
        raise QuantityError(f"quantities must match the regular expression: {value!r}")
    if isinstance(value, (int, float, Decimal)):
        return Decimal(str(value))
    if not isinstance(value, str):
        raise QuantityError(f"unsupported quantity type {type(value).__name__}")
    match = _RE.match(value.strip())
    if not match:
        raise QuantityError(
            "quantities must match the regular expression "
            "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
        )
    number, suffix = match.group(1), match.group(2) or ""
    try:
        base = Decimal(number)
    except InvalidOperation as exc:  # pragma: no cover - the regex already guards this
        raise QuantityError(str(exc)) from exc
    if suffix in _BINARY:
        return base * _BINARY[suffix]
    if suffix in _DECIMAL:
        return base * _DECIMAL[suffix]
    return base * (Decimal(10) ** int(suffix[1:]))


def is_quantity(value: Any) -> bool:
    """True when ``value`` parses as a quantity."""
    try:
        parse(value)
    except QuantityError:
        return False
    return True


def milli(value: Any) -> int:
    """Quantity in thousandths, rounded up (how the scheduler counts CPU)."""
    d = parse(value) * 1000
    return int(d.to_integral_value(rounding="ROUND_CEILING"))


def whole(value: Any) -> int:
    """Quantity as an integer, rounded up (bytes of memory, GPUs, pods)."""
    return int(parse(value).to_integral_value(rounding="ROUND_CEILING"))


def format_quantity(value: Decimal | int, binary: bool = False) -> str:
    """Format a value canonically: integers as-is or with the largest exact suffix,
    fractions in milli units. ``binary`` prefers ``Ki``/``Mi``/``Gi`` suffixes (memory)."""
    d = Decimal(value)
    if d == d.to_integral_value():
        n = int(d)
        if n == 0:
            return "0"
        if binary:
            for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
                if n % _BINARY[suffix] == 0:
                    return f"{n // _BINARY[suffix]}{suffix}"
            return str(n)
        for suffix in ("E", "P", "T", "G", "M", "k"):
            factor = int(_DECIMAL[suffix])
            if n % factor == 0:
                return f"{n // factor}{suffix}"
        return str(n)
    m = d * 1000
    if m == m.to_integral_value():
        return f"{int(m)}m"
    return f"{int((d * 1000).to_integral_value(rounding='ROUND_CEILING'))}m"


def format_cpu(millis: int) -> str:
    """CPU in millicores back to a quantity (``1500`` -> ``1500m``, ``2000`` -> ``2``)."""
    if millis % 1000 == 0:
        return str(millis // 1000)
    return f"{millis}m"


def format_memory(num_bytes: int) -> str:
    """Bytes back to a quantity with the largest exact binary suffix."""
    return format_quantity(num_bytes, binary=True)


def format_resource(name: str, amount: int) -> str:
    """Format a scheduler amount (millis for cpu, whole units otherwise)."""
    if name.endswith("cpu"):
        return format_cpu(amount)
    if name.endswith(("memory", "storage")):
        return format_memory(amount)
    return str(amount)


def amount(name: str, value: Any) -> int:
    """Scheduler amount of a quantity: millicores for ``cpu``, whole units for the rest."""
    if isinstance(value, str | int):
        return _amount(name, value)
    return _amount.__wrapped__(name, value)


# The scheduler and the quota admission read every container's resources of every pod
# they look at, and the same few quantities ("1", "8Gi", "nvidia.com/gpu: 1") come back
# all the time: parsing them was a twentieth of the simulator's CPU in a burst of creates.
# typed: True and 1 hash alike, and True is no quantity.
@functools.lru_cache(maxsize=4096, typed=True)
def _amount(name: str, value: Any) -> int:
    if name.endswith("cpu"):
        return milli(value)
    return whole(value)
