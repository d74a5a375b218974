"""How much of a log to read: a number of lines and a number of bytes, so a chatty
process cannot make the control plane read or send megabytes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError

DEFAULT_TAIL = 200
MAX_TAIL = 5000
DEFAULT_BYTES = 256 * 1024
MAX_BYTES = 1024 * 1024


@dataclass(frozen=True)
class LogBounds:
    """How much of the log to read: the last ``tail`` lines, at most ``limit_bytes``."""

    tail: int = DEFAULT_TAIL
    limit_bytes: int = DEFAULT_BYTES

    @classmethod
    def parse(cls, params: Mapping[str, Any]) -> LogBounds:
        """From query parameters ``tail`` and ``limit_bytes``; a bad one is a 400."""
        errors: dict[str, str] = {}
        values = {}
        for key, default, most in (
            ("tail", DEFAULT_TAIL, MAX_TAIL),
            ("limit_bytes", DEFAULT_BYTES, MAX_BYTES),
        ):
            raw = params.get(key)
            if raw in (None, ""):
                values[key] = default
                continue
            # Decimal digits only: int() also takes "1_000", "+5", " 5" and other
            # scripts' digits, which the schema (type: integer) does not.
            text = str(raw)
            value = int(text) if text.isascii() and text.isdigit() else 0
            if not 1 <= value <= most:
                errors[key] = f"A whole number from 1 to {most}."
            values[key] = value
        if errors:
            raise ValidationError(errors)
        return cls(**values)


def bounded(text: str, bounds: LogBounds) -> tuple[str, bool]:
    lines = text.splitlines(keepends=True)
    truncated = len(lines) > bounds.tail
    kept = "".join(lines[-bounds.tail :])
    data = kept.encode()
    if len(data) > bounds.limit_bytes:
        kept = data[-bounds.limit_bytes :].decode("utf-8", errors="ignore")
        truncated = True
    return kept, truncated
