"""What a quota change would do, before it is saved: the platform admin's live preview.

From today's snapshot, by the admission core every pass runs (no second scheduler):
oversubscription (nominal quotas per flavor, fleet-wide and per cohort, against the
fleet's GPUs), the waiting requests one pass with the new quotas would admit that
today's would not, and the flavors where the tenant would become a borrower (with what
a lender could then reclaim from it). Nothing here writes.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any

from clusters import admission as adm
from clusters.models import ClusterRequest
from clusters.queue.snapshot_reads import build_snapshot
from tenants.models import GpuFlavor, Quota, Tenant


@dataclass(frozen=True)
class ProposedLine:
    """One flavor's line of the proposed quota (as the quota form and API take it)."""

    flavor: str
    gpus: int
    borrow_limit: int = 0
    lend_limit: int | None = None


@dataclass
class FlavorTotal:
    """One flavor's nominal quotas summed, against its fleet (whole and per cohort)."""

    flavor: str
    fleet_gpus: int
    nominal_before: int
    nominal_after: int
    cohorts: list[dict[str, Any]] = field(default_factory=list)

    @property
    def oversubscribed(self) -> bool:
        """Whether the promised GPUs exceed the fleet after the change."""
        return self.nominal_after > self.fleet_gpus


@dataclass
class Preview:
    """What the change would do; see the module docstring."""

    totals: list[FlavorTotal]
    would_admit: list[ClusterRequest]
    borrowing: list[dict[str, Any]]
    warnings: list[str]


def quota_preview(*, tenant: Tenant, lines: Sequence[ProposedLine]) -> Preview:
    """The preview of replacing ``tenant``'s GPU quota with ``lines``."""
    snapshot, _ = build_snapshot()
    proposed = [
        adm.QuotaQ(tenant.slug, ln.flavor, ln.gpus, ln.borrow_limit, ln.lend_limit) for ln in lines
    ]
    others = [q for q in snapshot.quotas if q.tenant != tenant.slug]
    changed = replace(snapshot, quotas=[*others, *proposed])
    totals = _totals(tenant=tenant, before=snapshot.quotas, after=changed.quotas)
    today = set(adm.decide(snapshot).admitted)
    then = adm.decide(changed)
    newly = [pk for pk in then.admitted if pk not in today and pk > 0]  # surges: < 0
    rows = {
        row.pk: row
        for row in ClusterRequest.objects.unscoped()
        .filter(pk__in=newly)
        .select_related("tenant", "flavor", "owner")
    }
    would_admit = [rows[pk] for pk in newly if pk in rows]
    borrowing = _borrowing(tenant=tenant, snapshot=snapshot, lines=lines)
    warnings = [
        f"Nominal {t.flavor} quotas would add up to {t.nominal_after} GPUs; the fleet has "
        f"{t.fleet_gpus}. Tenants could be promised GPUs that do not exist."
        for t in totals
        if t.oversubscribed
    ]
    for t in totals:
        for c in t.cohorts:
            if c["after"] > t.fleet_gpus and c["after"] != t.nominal_after:
                warnings.append(
                    f"The {c['cohort']} cohort's nominal {t.flavor} quotas would add up to "
                    f"{c['after']} GPUs; the fleet has {t.fleet_gpus}."
                )
    return Preview(totals=totals, would_admit=would_admit, borrowing=borrowing, warnings=warnings)


def _totals(
    *, tenant: Tenant, before: Sequence[adm.QuotaQ], after: Sequence[adm.QuotaQ]
) -> list[FlavorTotal]:
    cohort_of = dict(Tenant.objects.unscoped().values_list("slug", "cohort"))
    out = []
    for flavor in GpuFlavor.objects.order_by("name"):

        def summed(quotas: Sequence[adm.QuotaQ], flavor: str = flavor.name) -> dict[str, int]:
            per: dict[str, int] = defaultdict(int)
            for q in quotas:
                if q.flavor == flavor:
                    per[cohort_of.get(q.tenant, "default")] += q.gpus
            return per

        was, will = summed(before), summed(after)
        if not was and not will:
            continue
        cohorts = [
            {"cohort": c, "before": was.get(c, 0), "after": will.get(c, 0)}
            for c in sorted(set(was) | set(will))
        ]
        out.append(
            FlavorTotal(
                flavor=flavor.name,
                fleet_gpus=flavor.max_gpus,
                nominal_before=sum(was.values()),
                nominal_after=sum(will.values()),
                cohorts=cohorts,
            )
        )
    return out


def _borrowing(
    *, tenant: Tenant, snapshot: adm.Snapshot, lines: Sequence[ProposedLine]
) -> list[dict[str, Any]]:
    """Flavors where the tenant's running clusters would exceed its new nominal quota."""
    held: dict[str, Decimal] = defaultdict(Decimal)
    clusters: dict[str, list[int]] = defaultdict(list)
    for r in snapshot.running:
        if r.tenant == tenant.slug:
            held[r.flavor] += r.gpus
            clusters[r.flavor].append(r.id)
    new = {ln.flavor: ln for ln in lines}
    old = {q.flavor.name: q for q in Quota.objects.for_tenant(tenant).select_related("flavor")}
    ids = [pk for pks in clusters.values() for pk in pks]
    names = dict(ClusterRequest.objects.unscoped().filter(pk__in=ids).values_list("pk", "name"))
    out = []
    for flavor, gpus in sorted(held.items()):
        line = new.get(flavor)
        nominal = line.gpus if line else 0
        limit = nominal + (line.borrow_limit if line else 0)
        was = old.get(flavor)
        was_borrowing = was is not None and gpus > was.gpus
        if gpus > nominal:
            out.append(
                {
                    "flavor": flavor,
                    "held": gpus,
                    "nominal": nominal,
                    "borrowed": gpus - nominal,
                    "over_limit": gpus > limit,
                    "already": was_borrowing,
                    "clusters": sorted(names.get(pk, str(pk)) for pk in clusters[flavor]),
                }
            )
    return out
