"""Usage-decayed fair share: what tenants and engineers held recently, older hours weighing less.

A GPU-hour held ``age`` ago counts ``2 ** (-age / half_life)`` of a GPU-hour now, so a
span of ``gpus`` GPUs from ``start`` to ``end`` counts the closed-form integral of
:func:`decayed_gpu_hours`. :class:`RecentUsage` carries those sums per (tenant, flavor)
and per (tenant, engineer) into the snapshot; with no half-life it is off and the queue
orders by what tenants hold now only, as it always did. Pure.

Why the queue adds the recent *average* to what a tenant holds now (see
:meth:`RecentUsage.held`): decayed GPU-hours over the mean life ``half_life / ln 2`` are
the exponentially weighted average of GPUs held, comparable to GPUs held now (a tenant
that always held 8 GPUs has an average of 8). Counting what is held now as well means a
request admitted in this pass weighs on its tenant at once (Kueue's "entry penalty"
plays that part), so one pass does not give every free GPU to the tenant with the least
history; in a steady state both terms agree and the order is today's.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal

LN2 = math.log(2)
HOUR = 3600.0


def decay(age: timedelta, half_life: timedelta) -> float:
    """What one GPU-hour held ``age`` ago weighs now (1 now, 1/2 a half-life ago)."""
    return math.exp(-LN2 * max(age.total_seconds(), 0.0) / half_life.total_seconds())


def decayed_gpu_hours(
    gpus: Decimal | float,
    start: datetime,
    end: datetime | None,
    now: datetime,
    half_life: timedelta,
) -> float:
    """``gpus`` held from ``start`` to ``end`` (``None``: still held) as decayed GPU-hours
    at ``now``: the integral of ``gpus * decay(now - t)`` over the span, in closed form
    ``gpus * tau * (decay(now - end) - decay(now - start))`` with ``tau`` the mean life.
    What lies after ``now`` is not counted."""
    end = now if end is None or end > now else end
    if end <= start:
        return 0.0
    tau = half_life.total_seconds() / LN2 / HOUR
    return float(gpus) * tau * (decay(now - end, half_life) - decay(now - start, half_life))


@dataclass(frozen=True)
class Span:
    """A stretch of GPUs held (a usage span as the pure code sees it)."""

    tenant: str
    owner: int
    flavor: str
    gpus: Decimal
    start: datetime
    end: datetime | None = None


@dataclass(frozen=True)
class RecentUsage:
    """Decayed GPU-hours per (tenant, flavor) and per (tenant, engineer id) at the
    snapshot's time; ``half_life`` ``None``: usage-decayed fair share is off."""

    half_life: timedelta | None = None
    gpu_hours: Mapping[tuple[str, str], float] = field(default_factory=dict)
    owner_gpu_hours: Mapping[tuple[str, int], float] = field(default_factory=dict)

    @property
    def on(self) -> bool:
        """Whether recent usage weighs in the queue's order."""
        return self.half_life is not None

    @property
    def mean_life_hours(self) -> float:
        """The half-life over ln 2: decayed GPU-hours over it are an average of GPUs held."""
        if self.half_life is None:
            return 0.0
        return self.half_life.total_seconds() / LN2 / HOUR

    def held(self) -> dict[tuple[str, str], float]:
        """Per (tenant, flavor): the exponentially weighted average of GPUs held recently,
        which the queue adds to what the tenant holds now (nothing when off)."""
        if not self.on:
            return {}
        tau = self.mean_life_hours
        return {key: hours / tau for key, hours in self.gpu_hours.items() if hours > 0}

    def tenant_hours(self, tenant: str) -> float:
        """The tenant's decayed GPU-hours over every flavor."""
        return sum(h for (t, _), h in self.gpu_hours.items() if t == tenant)

    def owner_use(self, tenant: str, owner: int) -> float:
        """An engineer's decayed GPU-hours in a tenant (0 when off: the order ignores it)."""
        if not self.on:
            return 0.0
        return self.owner_gpu_hours.get((tenant, owner), 0.0)


def recent_usage(spans: Iterable[Span], *, now: datetime, half_life: timedelta) -> RecentUsage:
    """:class:`RecentUsage` from spans in memory (the database sums them in SQL:
    ``clusters.queue.usage_reads``; tests and simulations use this)."""
    by_flavor: dict[tuple[str, str], float] = defaultdict(float)
    by_owner: dict[tuple[str, int], float] = defaultdict(float)
    for s in spans:
        hours = decayed_gpu_hours(s.gpus, s.start, s.end, now, half_life)
        by_flavor[s.tenant, s.flavor] += hours
        by_owner[s.tenant, s.owner] += hours
    return RecentUsage(half_life, dict(by_flavor), dict(by_owner))


def half_life_words(half_life: timedelta) -> str:
    """A half-life in words: "7 days", "12 hours", "1 day"."""
    hours = half_life.total_seconds() / HOUR
    if hours >= 24 and hours % 24 == 0:
        days = int(hours // 24)
        return f"{days} day" + ("" if days == 1 else "s")
    text = f"{hours:g}"
    return f"{text} hour" + ("" if text == "1" else "s")


def standing_sentence(slug: str, recent: RecentUsage, weights: Mapping[str, Decimal]) -> str:
    """What a tenant's recent usage does to its requests, for its own pages: its decayed
    GPU-hours and whether its part of its cohort's (``weights``: the cohort's tenants)
    is above or below its weight's part. Another team's hours are never named."""
    if recent.half_life is None or slug not in weights:
        return ""
    total_weight = sum(weights.values(), Decimal(0))
    hours = {t: recent.tenant_hours(t) for t in weights}
    total_hours = sum(hours.values())
    part = hours[slug] / total_hours if total_hours else 0.0
    entitled = float(weights[slug] / total_weight) if total_weight else 0.0
    lead = (
        f"Recent usage counts in the queue (half-life {half_life_words(recent.half_life)}): "
        f"{slug} used {hours[slug]:,.0f} GPU-hours, {round(100 * part)}% of its cohort's, "
        f"against {round(100 * entitled)}% by weight"
    )
    if part > entitled + AT_SHARE:
        return f"{lead}, so its requests go after those of teams under their share."
    if part < entitled - AT_SHARE:
        return f"{lead}, so its requests go before those of teams over their share."
    return f"{lead}: at its share."


# Within this many points of its weight's part, a tenant is "at its share".
AT_SHARE = 0.02
