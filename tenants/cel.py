"""CEL device selectors as the API server checks them: a flavor's selector must compile and
name no variable but ``device`` before it goes into a ResourceClaimTemplate."""

from __future__ import annotations

import re
from functools import lru_cache

import cel


@lru_cache(maxsize=256)
def selector_problem(expression: str) -> str | None:
    """Why ``expression`` is not a usable device selector (None: it is)."""
    try:
        program = cel.compile(expression)
    except (ValueError, RuntimeError) as exc:
        text = re.sub(r"^Failed to parse expression '.*?': ", "", str(exc), flags=re.S)
        return f"The selector does not compile as CEL: {text.strip()}"
    unknown = sorted(v for v in program.variables() if v != "device")
    if unknown:
        return (
            f"The selector names '{unknown[0]}'; a device selector may only use 'device' "
            '(e.g. device.attributes["gpu.nvidia.com"].productName).'
        )
    return None
