"""Kubernetes CEL library functions that cel-rust does not provide, for CRD validation rules.

The shipped CRDs' rules use only CEL's standard macros and functions (``has``, ``all``,
``exists``, ``filter``, ``size``, ``in``), which cel-rust has. These cover the Kubernetes list
library (``isSorted``, ``sum``, ``min``, ``max``, ``indexOf``, ``lastIndexOf``), the strings
extension (``charAt``, ``lowerAscii``, ``upperAscii``, ``replace``, ``split``, ``substring``,
``trim``, ``join``) and the regex library (``find``, ``findAll``) for rules a newer CRD brings.
"""

from __future__ import annotations

import itertools
import re
from typing import Any


def _is_sorted(items: Any) -> bool:
    values = list(items)
    return all(a <= b for a, b in itertools.pairwise(values))


def _sum(items: Any) -> Any:
    values = list(items)
    return sum(values[1:], values[0]) if values else 0


def _min(items: Any) -> Any:
    values = list(items)
    if not values:
        raise ValueError("min called on empty list")
    return min(values)


def _max(items: Any) -> Any:
    values = list(items)
    if not values:
        raise ValueError("max called on empty list")
    return max(values)


def _index_of(target: Any, item: Any, start: int = 0) -> int:
    if isinstance(target, str):
        return target.find(item, start)
    values = list(target)
    return values.index(item) if item in values else -1


def _last_index_of(target: Any, item: Any) -> int:
    if isinstance(target, str):
        return target.rfind(item)
    values = list(target)
    return len(values) - 1 - values[::-1].index(item) if item in values else -1


def _split(text: str, sep: str, limit: int = -1) -> list[str]:
    if limit == 0:
        return []
    return text.split(sep, limit - 1) if limit > 0 else text.split(sep)


def _substring(text: str, start: int, end: int | None = None) -> str:
    if start < 0 or start > len(text) or (end is not None and not start <= end <= len(text)):
        raise ValueError("index out of range")
    return text[start:end]


def _join(items: Any, sep: str = "") -> str:
    return sep.join(items)


def _find(text: str, pattern: str) -> str:
    found = re.search(pattern, text)
    return found.group(0) if found else ""


def _find_all(text: str, pattern: str, limit: int = -1) -> list[str]:
    found = [m.group(0) for m in re.finditer(pattern, text)]
    return found if limit < 0 else found[:limit]


FUNCTIONS: dict[str, Any] = {
    "isSorted": _is_sorted,
    "sum": _sum,
    "min": _min,
    "max": _max,
    "indexOf": _index_of,
    "lastIndexOf": _last_index_of,
    "charAt": lambda text, i: text[i] if i < len(text) else "",
    "lowerAscii": lambda text: "".join(c.lower() if c.isascii() else c for c in text),
    "upperAscii": lambda text: "".join(c.upper() if c.isascii() else c for c in text),
    "replace": lambda text, old, new, n=-1: text.replace(old, new, n),
    "split": _split,
    "substring": _substring,
    "trim": lambda text: text.strip(),
    "join": _join,
    "find": _find,
    "findAll": _find_all,
}

# CEL's standard functions that cel-rust has (operators and macros compile to ``_x_``/``@x``).
STANDARD = {
    "size", "matches", "contains", "startsWith", "endsWith", "string", "int", "uint", "double",
    "bytes", "bool", "duration", "timestamp", "type", "dyn", "getDate", "getDayOfMonth",
    "getDayOfWeek", "getDayOfYear", "getFullYear", "getHours", "getMilliseconds", "getMinutes",
    "getMonth", "getSeconds", "hasValue", "value", "orValue", "or",
}  # fmt: skip
KNOWN = STANDARD | set(FUNCTIONS)

__all__ = ["FUNCTIONS", "KNOWN", "STANDARD"]
