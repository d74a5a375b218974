"""CRD printer columns (``additionalPrinterColumns``) as apiextensions-apiserver prints them.

Each column's ``jsonPath`` is evaluated as the template ``{<jsonPath>}`` with missing keys
allowed, and only its first value is used. A ``string`` column prints it as client-go's
JSONPath printer does (maps and lists as compact JSON); ``integer``, ``number`` and
``boolean`` columns keep a value of their type, and ``date`` prints the age of an RFC 3339
time (``<invalid>`` when it is none). Anything else is an empty (null) cell.
"""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from kubesim.jsonpath import JSONPathError, find_results, parse
from kubesim.resources import ResourceType

_CACHE: dict[tuple[int, str], tuple[ResourceType, list[Column]]] = {}


@dataclass
class Column:
    """One additional printer column: its Table column definition and its parsed path."""

    definition: dict[str, Any]
    template: list[Any] | None  # None: the path does not parse, so every cell is empty

    def cell(self, obj: dict[str, Any]) -> Any:
        """The column's cell for one object (None prints as an empty cell)."""
        if self.template is None:
            return None
        try:
            results = find_results(self.template, obj)
        except JSONPathError:
            return None
        if not results or not results[0]:
            return None
        value = results[0][0]
        ctype = self.definition["type"]
        if ctype == "string":
            return go_text(value)
        return _typed(ctype, value)


def printer_columns(rt: ResourceType, version: str) -> list[Column]:
    """The printer columns of one served version of a custom kind (parsed once)."""
    key = (id(rt), version)
    cached = _CACHE.get(key)
    if cached is not None and cached[0] is rt:
        return cached[1]
    columns = []
    for spec in rt.printer_columns.get(version) or []:
        path = spec.get("jsonPath", "")
        try:
            template: list[Any] | None = parse("{" + path + "}")
        except JSONPathError:
            template = None
        definition = {
            "name": spec["name"],
            "type": spec.get("type", "string"),
            "format": spec.get("format", ""),
            "description": spec.get("description")
            or f"Custom resource definition column (in JSONPath format): {path}",
            "priority": int(spec.get("priority", 0)),
        }
        columns.append(Column(definition, template))
    _CACHE[key] = (rt, columns)
    return columns


def go_text(value: Any) -> str:
    """A value as client-go's JSONPath printer writes it: text as is, maps and lists as
    compact JSON (keys sorted, HTML characters escaped, as Go's encoder does), numbers as
    Go's ``%v``, and ``<no value>`` for null."""
    if value is None:
        return "<no value>"
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return go_float(value)
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def go_float(value: float) -> str:
    """A float64 as Go's ``%v`` prints it: the shortest digits, in exponent form when the
    exponent is below -4 or at least 6 (``1e+06``, ``1.5e-05``, ``0.25``, ``123456``)."""
    if value != value or value in (float("inf"), float("-inf")):
        return {"nan": "NaN", "inf": "+Inf", "-inf": "-Inf"}[repr(value)]
    if value == 0:
        return "0"
    sign, digits, exp = Decimal(repr(value)).normalize().as_tuple()
    assert isinstance(exp, int)
    text = "".join(map(str, digits))
    point = len(text) + exp  # the decimal point's position after the first digit
    lead = "-" if sign else ""
    if point - 1 < -4 or point - 1 >= 6:
        mantissa = text[0] + ("." + text[1:] if len(text) > 1 else "")
        return f"{lead}{mantissa}e{'-' if point - 1 < 0 else '+'}{abs(point - 1):02d}"
    if point <= 0:
        return f"{lead}0.{'0' * -point}{text}"
    if point >= len(text):
        return lead + text + "0" * (point - len(text))
    return f"{lead}{text[:point]}.{text[point:]}"


def _typed(ctype: str, value: Any) -> Any:
    if value is None:
        return None
    if ctype == "integer" and not isinstance(value, bool):
        if isinstance(value, int):
            return value
        if isinstance(value, float):
            return int(value)
    elif ctype == "number" and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    elif ctype == "boolean" and isinstance(value, bool):
        return value
    elif ctype == "date" and isinstance(value, str):
        try:
            stamp = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return "<invalid>"
        if stamp.tzinfo is None:
            return "<invalid>"
        now = datetime.datetime.now(datetime.UTC)
        return human_duration((now - stamp).total_seconds())
    return None


def human_duration(seconds: float) -> str:
    """A duration as the API server's printers write it (``duration.HumanDuration``):
    ``45s``, ``2m30s``, ``12m``, ``3h15m``, ``2d5h``, ``40d``, ``2y30d``."""
    secs = int(seconds)
    if secs < -1:
        return "<invalid>"
    if secs < 0:
        return "0s"
    if secs < 120:
        return f"{secs}s"
    minutes = secs // 60
    if minutes < 10:
        return f"{minutes}m{secs % 60}s" if secs % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = secs // 3600
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d{hours % 24}h" if hours % 24 else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y{days}d" if days else f"{hours // 24 // 365}y"
    return f"{hours // 24 // 365}y"
