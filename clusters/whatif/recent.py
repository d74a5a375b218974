"""Decayed GPU-hours through a replay, for the pass's usage-decayed fair share.

The real pass reads every usage span, the held ones up to now, decayed with the
configured half-life (``clusters.queue.usage_reads``); a replay hands its pass the same
sums (:class:`~clusters.admission.decayed_usage.RecentUsage`). Ended spans are folded
into running totals valued at the last end (decay is a factor, so the totals age by one
multiplication), held ones are added per pass in closed form; the result equals
:func:`~clusters.admission.decayed_usage.recent_usage` over all the spans
(``tests/clusters/whatif/test_week_measures.py``). Pure.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal

from clusters.admission.decayed_usage import LN2, RecentUsage


@dataclass(frozen=True)
class Held:
    """A span still held: its tenant, engineer, flavor, GPUs and start (seconds)."""

    tenant: str
    owner: int
    flavor: str
    gpus: Decimal
    start: float


@dataclass
class DecayedTotals:
    """Decayed GPU-hours of ended spans per (tenant, flavor) and (tenant, engineer),
    valued at ``at`` seconds into the replay."""

    half_life: timedelta
    at: float = 0.0
    by_flavor: dict[tuple[str, str], float] = field(default_factory=lambda: defaultdict(float))
    by_owner: dict[tuple[str, int], float] = field(default_factory=lambda: defaultdict(float))

    @property
    def rate(self) -> float:
        return LN2 / self.half_life.total_seconds()

    @property
    def tau_hours(self) -> float:
        return self.half_life.total_seconds() / LN2 / 3600

    def _age_to(self, now: float) -> None:
        if now <= self.at:
            return
        factor = math.exp(-self.rate * (now - self.at))
        for key in self.by_flavor:
            self.by_flavor[key] *= factor
        for okey in self.by_owner:
            self.by_owner[okey] *= factor
        self.at = now

    def ended(self, span: Held, end: float) -> None:
        """Fold in a span that ended at ``end`` (ends come in time order)."""
        self._age_to(end)
        hours = self._hours(span, end)
        self.by_flavor[span.tenant, span.flavor] += hours
        self.by_owner[span.tenant, span.owner] += hours

    def _hours(self, span: Held, now: float) -> float:
        """A span held from its start to ``now``, as decayed GPU-hours at ``now``."""
        length = max(now - span.start, 0.0)
        return float(span.gpus) * self.tau_hours * (1 - math.exp(-self.rate * length))

    def usage(self, now: float, held: Iterable[Held]) -> RecentUsage:
        """The decayed GPU-hours at ``now`` of the ended spans and of ``held``."""
        factor = math.exp(-self.rate * max(now - self.at, 0.0))
        by_flavor = {k: v * factor for k, v in self.by_flavor.items()}
        by_owner = {k: v * factor for k, v in self.by_owner.items()}
        for span in held:
            hours = self._hours(span, now)
            by_flavor[span.tenant, span.flavor] = (
                by_flavor.get((span.tenant, span.flavor), 0.0) + hours
            )
            by_owner[span.tenant, span.owner] = by_owner.get((span.tenant, span.owner), 0.0) + hours
        return RecentUsage(self.half_life, by_flavor, by_owner)
