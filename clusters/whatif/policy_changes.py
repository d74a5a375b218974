"""The planner's policy changes of issue 49: ``half-life:HOURS`` (usage-decayed fair
share; 0: off), ``notice:SECONDS`` (preemption with notice, runs checkpointing on it;
``notice:off``: today's warning) and ``requeue:back`` / ``requeue:place`` (where a run
preempted with notice queues again). See docs/whatif.md."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import timedelta
from decimal import Decimal, InvalidOperation

from clusters.whatif.change import Change, WhatIfError
from clusters.whatif.model import World

# Policy changes of issue 49: a half-life in hours, a notice in seconds, the requeue.
POLICY_CHANGE = re.compile(r"^(half-life|notice|requeue):(\S+)$")
# Beyond these a half-life or a notice says nothing a week can show.
MAX_HALF_LIFE_HOURS = 24 * 365
MAX_NOTICE_SECONDS = 24 * 3600


def policy_change(text: str, what: str, value: str) -> Change:
    """A ``half-life:``, ``notice:`` or ``requeue:`` change, checked."""
    if what == "requeue":
        if value not in ("back", "place"):
            raise WhatIfError(f"Cannot read {text!r}: write requeue:back or requeue:place.")
        return Change(what, "", "", Decimal(value == "place"), False, text, value)
    if what == "notice" and value == "off":
        return Change(what, "", "", Decimal(-1), False, text, "off")
    unit, most = (
        ("hours", MAX_HALF_LIFE_HOURS) if what == "half-life" else ("seconds", MAX_NOTICE_SECONDS)
    )
    try:
        number = Decimal(value)
    except InvalidOperation:
        number = Decimal("NaN")
    if not number.is_finite() or not 0 <= number <= most:
        extra = " (0: off)" if what == "half-life" else ", or notice:off"
        raise WhatIfError(
            f"Cannot read {text!r}: write {what}:N with N {unit} from 0 to {most:,}{extra}."
        )
    return Change(what, "", "", number, False, text)


def apply_policy(world: World, c: Change) -> World:
    """``world`` with a ``half-life:``, ``notice:`` or ``requeue:`` change applied."""
    if c.what == "half-life":
        hours = float(c.value)
        return replace(world, half_life=timedelta(hours=hours) if hours > 0 else None)
    if c.what == "notice":
        off = c.value < 0
        return replace(world, notice=None if off else timedelta(seconds=float(c.value)))
    return replace(world, keep_place=bool(c.value))
