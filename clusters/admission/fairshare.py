"""Fair share, explained: per cohort, tenant and flavor, what the admission core counts.

:func:`fair_share` reads a snapshot through the pass's own
:class:`~clusters.admission.ledger.Ledger`, so the page shows the numbers the queue is
ordered by, never a second formula. On top it says what each tenant borrows (held above
its nominal quota) and lends (its unused quota the borrowers use, at most ``lend_limit``,
shared among lenders in proportion), and whether CPU and memory quotas bind (a waiting
request of the tenant waits on them). Pure.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, replace
from decimal import Decimal

from clusters.admission.decayed_usage import AT_SHARE, RecentUsage, half_life_words
from clusters.admission.ledger import Ledger, Pool
from clusters.admission.snapshot import ZERO, Snapshot

# Lent GPUs are a proportion: shown to the hundredth.
_CENTS = Decimal("0.01")


@dataclass(frozen=True)
class FlavorShare:
    """A tenant on one flavor: its quota, what it holds, borrows and lends, its share."""

    flavor: str
    nominal: int
    borrow_limit: int
    lend_limit: int | None
    used: Decimal
    borrowed: Decimal
    lent: Decimal
    share: float
    dominant: bool
    # Decayed GPU-hours on the flavor (usage-decayed fair share; 0 when off).
    recent_gpu_hours: float = 0.0


@dataclass(frozen=True)
class Resource:
    """A tenant's CPU or memory quota (``quota`` > 0) and whether a waiting request of
    the tenant waits on it."""

    label: str
    unit: str
    used: Decimal
    quota: int
    binding: bool


@dataclass(frozen=True)
class TenantShare:
    """A tenant of a cohort: its weight, its weighted dominant share and its flavors."""

    tenant: str
    weight: Decimal
    share: float
    flavors: tuple[FlavorShare, ...]
    resources: tuple[Resource, ...]
    # Usage-decayed fair share (zero and empty when off): the tenant's decayed GPU-hours,
    # its part of its cohort's, the part its weight entitles it to, and that in words.
    recent_gpu_hours: float = 0.0
    recent_part: float = 0.0
    weight_part: float = 0.0
    standing: str = ""

    @property
    def percent(self) -> int:
        """The share as a bar's length (a share above 1, possible below weight 1: full)."""
        return min(100, round(100 * self.share))


@dataclass(frozen=True)
class CohortShare:
    """A cohort's tenants, lowest weighted dominant share (next in line) first."""

    cohort: str
    tenants: tuple[TenantShare, ...]
    # The half-life of usage-decayed fair share, in words ("": off).
    half_life: str = ""


def lent_by(borrowed: Decimal, lendable: Mapping[str, Decimal]) -> dict[str, Decimal]:
    """What each lender lends when the cohort's borrowers use ``borrowed`` GPUs beyond
    their nominal quotas and each lender may lend ``lendable``: all of it when the
    borrowers use at least that much, else a share in proportion to what it may lend."""
    total = sum(lendable.values(), ZERO)
    if borrowed <= 0 or total <= 0:
        return dict.fromkeys(lendable, ZERO)
    if borrowed >= total:
        return dict(lendable)
    return {t: (borrowed * amount / total).quantize(_CENTS) for t, amount in lendable.items()}


def fair_share(
    snapshot: Snapshot,
    *,
    lend_limits: Mapping[tuple[str, str], int | None],
    waiting_pools: Mapping[int, Pool] | None = None,
) -> list[CohortShare]:
    """Every cohort with its tenants (those with a quota or holding GPUs), by cohort name.

    ``lend_limits`` are the quotas' ``lend_limit`` per (tenant, flavor); ``waiting_pools``
    the pool each waiting request waits on (a recorded pass's ``pool_of``), which says
    whether a CPU (``tcpu``) or memory (``tmem``) quota binds.
    """
    led = Ledger(snapshot)
    binding = {(pool[0], pool[1]) for pool in (waiting_pools or {}).values() if len(pool) > 1}
    keys = set(led.nominal) | {key for key, used in led.usage.items() if used}
    by_tenant: dict[str, list[str]] = defaultdict(list)
    for tenant, flavor in sorted(keys):
        by_tenant[tenant].append(flavor)
    # What each lender may lend and the cohort's borrowers use, per (cohort, flavor).
    borrowed: dict[tuple[str, str], Decimal] = defaultdict(Decimal)
    lendable: dict[tuple[str, str], dict[str, Decimal]] = defaultdict(dict)
    for tenant, flavor in keys:
        cohort = led.cohort_of(tenant)
        nominal = Decimal(led.nominal.get((tenant, flavor), 0))
        used = led.usage[tenant, flavor]
        borrowed[cohort, flavor] += max(used - nominal, ZERO)
        unused = max(nominal - used, ZERO)
        limit = lend_limits.get((tenant, flavor))
        lendable[cohort, flavor][tenant] = unused if limit is None else min(unused, Decimal(limit))
    lent = {ckey: lent_by(borrowed[ckey], amounts) for ckey, amounts in lendable.items()}
    cohorts: dict[str, list[TenantShare]] = defaultdict(list)
    for tenant, flavors in by_tenant.items():
        policy = led.tenant(tenant)
        shares = {f: led.flavor_share(tenant, f, policy.weight) for f in flavors}
        dominant = max(shares.values(), default=0.0)
        rows = tuple(
            FlavorShare(
                flavor=f,
                nominal=led.nominal.get((tenant, f), 0),
                borrow_limit=led.borrow.get((tenant, f), 0),
                lend_limit=lend_limits.get((tenant, f)),
                used=led.usage[tenant, f],
                borrowed=max(led.usage[tenant, f] - led.nominal.get((tenant, f), 0), ZERO),
                lent=lent[led.cohort_of(tenant), f].get(tenant, ZERO),
                share=shares[f],
                dominant=dominant > 0 and shares[f] == dominant,
                recent_gpu_hours=snapshot.recent.gpu_hours.get((tenant, f), 0.0),
            )
            for f in flavors
        )
        resources = tuple(
            Resource(label, unit, used, quota, (pool, tenant) in binding)
            for label, unit, used, quota, pool in (
                ("CPU", "cores", led.cpu[tenant], policy.cpu_quota, "tcpu"),
                ("memory", "GiB", led.memory[tenant], policy.memory_quota_gib, "tmem"),
            )
            if quota
        )
        cohorts[led.cohort_of(tenant)].append(
            TenantShare(tenant, policy.weight, led.share[tenant], rows, resources)
        )
    recent = snapshot.recent
    half_life = half_life_words(recent.half_life) if recent.half_life is not None else ""
    return [
        CohortShare(
            cohort,
            tuple(
                sorted(
                    with_standing(members, recent) if recent.on else members,
                    key=lambda t: (t.share, t.tenant),
                )
            ),
            half_life,
        )
        for cohort, members in sorted(cohorts.items())
    ]


def with_standing(members: list[TenantShare], recent: RecentUsage) -> list[TenantShare]:
    """A cohort's tenants with their decayed GPU-hours, their part of the cohort's and
    the part their weights entitle them to, and whether they used more or less."""
    hours = {t.tenant: sum(f.recent_gpu_hours for f in t.flavors) for t in members}
    total_hours = sum(hours.values())
    total_weight = sum((t.weight for t in members), ZERO)
    out = []
    for t in members:
        part = hours[t.tenant] / total_hours if total_hours else 0.0
        entitled = float(t.weight / total_weight) if total_weight else 0.0
        out.append(
            replace(
                t,
                recent_gpu_hours=hours[t.tenant],
                recent_part=part,
                weight_part=entitled,
                standing=standing_words(part, entitled),
            )
        )
    return out


def standing_words(part: float, entitled: float) -> str:
    """A tenant's standing: its part of its cohort's recent GPU-hours against its
    weight's part ("over its share: 62% used, 50% by weight")."""
    numbers = f"{round(100 * part)}% used, {round(100 * entitled)}% by weight"
    if part > entitled + AT_SHARE:
        return f"over its share: {numbers}"
    if part < entitled - AT_SHARE:
        return f"under its share: {numbers}"
    return f"at its share: {numbers}"
