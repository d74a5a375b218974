"""Durations as people type them: ``8h``, ``90m``, ``2h30m``, ``45s``, ``1d`` (or a bare
number of hours, ``8``)."""

from __future__ import annotations

import math
import re

_PART = re.compile(r"(\d+)([dhms])")
_UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}


def parse_seconds(text: str) -> int:
    """Seconds in ``text``; a bare number counts hours. ``ValueError`` with a readable
    message for anything else (empty, unknown unit, zero)."""
    spec = text.strip().lower().replace(" ", "")
    if spec.isdigit():
        seconds = int(spec) * 3600
    else:
        if not spec or _PART.sub("", spec):
            raise ValueError(f"'{text}' is not a duration: write it like 8h, 90m or 2h30m")
        seconds = sum(int(n) * _UNITS[unit] for n, unit in _PART.findall(spec))
    if seconds <= 0:
        raise ValueError(f"'{text}' is not a positive duration")
    return seconds


def parse_hours(text: str) -> int:
    """Whole hours in ``text`` (the API counts TTLs and extensions in hours): ``2h`` is 2,
    ``1d`` 24; ``90m`` is refused, since rounding would give more or less than asked."""
    seconds = parse_seconds(text)
    if seconds % 3600:
        raise ValueError(
            f"'{text}' is not a whole number of hours: the server counts this in hours "
            f"(try {math.ceil(seconds / 3600)}h)"
        )
    return seconds // 3600


def format_seconds(seconds: float) -> str:
    """``2h30m``, ``45s``: the reverse of :func:`parse_seconds`, for display."""
    total = max(int(seconds), 0)
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    text = (f"{hours}h" if hours else "") + (f"{minutes}m" if minutes else "")
    return text or f"{secs}s"
