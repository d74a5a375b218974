"""The recorded history as the simulator replays it: the world as it is and a period's requests.

:func:`world_now` reads the catalogue, tenants, quotas and idle policies;
:func:`recorded_period` turns a period's requests into :class:`Demand` rows (when asked
for, how long GPUs were held and used, the wait it had). What the record cannot say is
left out and said so (docs/whatif.md): a request deleted before it started is not
replayed (people giving up are not modelled), and a life past the period is cut there.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Q

from clusters.admission import FlavorQ, QuotaQ
from clusters.domain.states import State
from clusters.domain.workload_kinds import kind_of
from clusters.models import ClusterRequest, IdleSpan, UsageSpan
from clusters.queue.snapshot_reads import tenant_q
from clusters.rows.spec import ClusterSpec
from clusters.whatif.model import Demand, IdlePolicy, Workload, World
from tenants.models import GpuFlavor, Quota, Tenant
from tenants.selectors import cohort_parents


def world_now() -> World:
    """The fleet, tenants, quotas and idle policies as they are in the database now."""
    tenants = list(Tenant.objects.unscoped())
    grace = float(settings.IDLE_GRACE_MINUTES)
    half_life = float(settings.FAIR_SHARE_HALF_LIFE_HOURS)
    flavors = list(GpuFlavor.objects.order_by("name"))
    return World(
        flavors=[FlavorQ(f.name, f.gpus_per_node, f.node_count) for f in flavors],
        # A product's DRA flavors (its whole GPUs, its MIG slices) claim devices of the
        # same DRA-managed nodes, as the reconciler counts them (clusters.queue.free_devices).
        shared_nodes={f.name: f"dra:{f.gpu_product}" for f in flavors if f.uses_dra},
        tenants=[tenant_q(t) for t in tenants],
        quotas=[
            QuotaQ(q.tenant.slug, q.flavor.name, q.gpus, q.borrow_limit, q.lend_limit)
            for q in Quota.objects.unscoped().select_related("tenant", "flavor")
        ],
        idle={
            t.slug: IdlePolicy(
                minutes=float(t.idle_suspend_minutes),
                grace_minutes=grace,
                prod=t.idle_suspend_prod,
            )
            for t in tenants
        },
        aging=timedelta(seconds=settings.ADMISSION_AGING_SECONDS),
        reclaim_grace=timedelta(seconds=settings.RECLAIM_GRACE_SECONDS),
        cohort_parents=cohort_parents(),
        # The pass's usage-decayed fair share as configured (usage before the period is
        # not replayed: it starts from none).
        half_life=timedelta(hours=half_life) if half_life > 0 else None,
    )


def recorded_period(*, start: datetime, end: datetime) -> Workload:
    """The requests asked for in ``[start, end)`` and those holding GPUs at ``start``."""
    if end <= start:
        raise ValueError("the period must end after it starts")
    period = (end - start).total_seconds()
    rows = list(
        ClusterRequest.objects.unscoped()
        .filter(
            Q(created_at__gte=start, created_at__lt=end)
            | Q(created_at__lt=start, usage_spans__started_at__lt=start)
            & (Q(usage_spans__ended_at__isnull=True) | Q(usage_spans__ended_at__gt=start))
        )
        .distinct()
        .select_related("tenant", "flavor")
        .order_by("created_at", "pk")
    )
    spans: dict[int, list[tuple[datetime, datetime]]] = defaultdict(list)
    for span in UsageSpan.objects.unscoped().filter(cluster__in=rows).order_by("started_at"):
        spans[span.cluster_id].append((span.started_at, span.ended_at or end))
    first_idle: dict[int, datetime] = {}
    for idle in IdleSpan.objects.unscoped().filter(cluster__in=rows).order_by("-started_at"):
        first_idle[idle.cluster_id] = idle.started_at
    demands = []
    for row in rows:
        used = spans.get(row.pk, [])
        before = row.created_at < start
        if not used and row.state != State.QUEUED:
            continue  # given up before it ever started: not replayed
        spec = ClusterSpec.of(row)
        first = max(used[0][0], start) if used else None
        held = sum((min(b, end) - max(a, start)).total_seconds() for a, b in used)
        idle_at = first_idle.get(row.pk)
        demands.append(
            Demand(
                id=row.pk,
                tenant=row.tenant.slug,
                owner=row.owner_id or 0,
                kind=row.kind,
                flavors=spec.flavor_names(),
                workers=spec.charged_workers(),
                worker_gpus=spec.worker_gpus(),
                arrival=0.0 if before else (row.created_at - start).total_seconds(),
                # Still waiting at the end: it would hold its GPUs past the period.
                hold=max(held, 1.0) if used else period,
                busy=(idle_at - first).total_seconds() if idle_at and first else None,
                ttl=row.ttl_hours * 3600.0 if row.ttl_hours else None,
                job=kind_of(row).workload == "job",
                priority=row.priority,
                recorded_wait=(
                    (used[0][0] - row.created_at).total_seconds() if used and not before else None
                ),
                running=before,
            )
        )
    label = f"recorded {start:%Y-%m-%d %H:%M} to {end:%Y-%m-%d %H:%M} UTC"
    return Workload(start, period, demands, label=label)
