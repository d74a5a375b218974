"""The admission pass's link to the database: build a snapshot, apply a decision.

:func:`build_snapshot` reads one query per table (tenants, flavors, quotas, clusters
holding GPUs, queued clusters) into the pure dataclasses of :mod:`clusters.admission`;
:func:`admit` and the ``apply_*`` functions write the outcome back: admitted rows move to
``admitted``, waiting rows get their position, reason, message and ETA (and the earmark
of a request that reclaimed capacity is promised to), and reclaim victims are warned,
then suspended once their grace period has passed. The same snapshot serves the
dry-run, so a verdict is computed by the very code the next pass runs.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.db import connection
from django.utils import timezone

from clusters import admission as adm
from clusters import capacity, shapes
from clusters.models import ClusterKind, ClusterRequest
from clusters.states import State
from clusters.transitions import note, transition
from tenants.models import GpuFlavor, Quota, Tenant


def _pending(
    *,
    pk: int,
    tenant: str,
    owner: int,
    flavor: str,
    gpus_per_node: int,
    kind: str,
    gpus: Decimal,
    created_at: datetime,
    cpu: Decimal,
    memory_gib: Decimal,
    priority: int,
    workers: int,
    min_workers: int | None,
    max_workers: int | None,
    gpu_fraction: Decimal | None,
    ttl_hours: int | None,
    earmarked: bool = False,
) -> adm.Pending:
    """The pure view of one request; a worker's GPUs are a whole node (prod), a fraction
    or one GPU (dev). An autoscaling cluster counts at its largest size, like its ``gpus``."""
    if kind == ClusterKind.PROD:
        worker_gpus = Decimal(gpus_per_node)
    else:
        worker_gpus = Decimal(gpu_fraction) if gpu_fraction is not None else Decimal(1)
    return adm.Pending(
        id=pk,
        tenant=tenant,
        owner=owner,
        flavor=flavor,
        kind=kind,
        gpus=Decimal(gpus),
        created_at=created_at,
        cpu=Decimal(cpu),
        memory_gib=Decimal(memory_gib),
        priority=priority,
        workers=shapes.charged_workers(
            kind=kind, workers=workers, min_workers=min_workers, max_workers=max_workers
        ),
        worker_gpus=worker_gpus,
        ttl=timedelta(hours=ttl_hours) if ttl_hours else None,
        earmarked=earmarked,
    )


def pending_of(row: ClusterRequest, *, pk: int | None = None) -> adm.Pending:
    """The pure view of a queued (or candidate, unsaved) request."""
    return _pending(
        pk=pk if pk is not None else row.pk,
        tenant=row.tenant.slug,
        owner=row.owner_id or 0,
        flavor=row.flavor.name,
        gpus_per_node=row.flavor.gpus_per_node,
        kind=row.kind,
        gpus=row.gpus,
        created_at=row.created_at or timezone.now(),
        cpu=row.cpu,
        memory_gib=row.memory_gib,
        priority=row.priority,
        workers=row.workers,
        min_workers=row.min_workers,
        max_workers=row.max_workers,
        gpu_fraction=row.gpu_fraction,
        ttl_hours=row.ttl_hours,
        earmarked=row.earmarked_at is not None,
    )


def _nodes(row: ClusterRequest) -> int:
    """Whole nodes a cluster is charged for: a prod cluster's workers at its largest size."""
    if row.kind != ClusterKind.PROD:
        return 0
    return shapes.charged_workers(
        kind=row.kind,
        workers=row.workers,
        min_workers=row.min_workers,
        max_workers=row.max_workers,
    )


@dataclass
class QueuedRow:
    """A queued request as the pass reads it: its id and its current queue fields.

    Read as plain values (not model instances): at 15,000 waiting requests, building
    model objects and parsing their every column is most of a pass's cost.
    """

    id: int
    queue: tuple[int | None, int | None, str, str, datetime | None]


_QUEUED_FIELDS = (
    "id",
    "tenant__slug",
    "owner_id",
    "flavor__name",
    "flavor__gpus_per_node",
    "kind",
    "gpus",
    "created_at",
    "cpu",
    "memory_gib",
    "priority",
    "workers",
    "min_workers",
    "max_workers",
    "gpu_fraction",
    "ttl_hours",
    "earmarked_at",
)
_QUEUE_FIELDS = (
    "queue_position",
    "queue_flavor_position",
    "queue_reason",
    "queue_message",
    "queue_eta",
)


def _queued() -> tuple[list[adm.Pending], list[QueuedRow]]:
    pending: list[adm.Pending] = []
    rows: list[QueuedRow] = []
    for values in (
        ClusterRequest.objects.unscoped()
        .filter(state=State.QUEUED)
        .values(*_QUEUED_FIELDS, *_QUEUE_FIELDS)
    ):
        pending.append(
            _pending(
                pk=values["id"],
                tenant=values["tenant__slug"],
                owner=values["owner_id"],
                flavor=values["flavor__name"],
                gpus_per_node=values["flavor__gpus_per_node"],
                kind=values["kind"],
                gpus=values["gpus"],
                created_at=values["created_at"],
                cpu=values["cpu"],
                memory_gib=values["memory_gib"],
                priority=values["priority"],
                workers=values["workers"],
                min_workers=values["min_workers"],
                max_workers=values["max_workers"],
                gpu_fraction=values["gpu_fraction"],
                ttl_hours=values["ttl_hours"],
                earmarked=values["earmarked_at"] is not None,
            )
        )
        queue = tuple(values[f] for f in _QUEUE_FIELDS)
        rows.append(QueuedRow(values["id"], queue))  # type: ignore[arg-type]
    return pending, rows


def tenant_q(tenant: Tenant) -> adm.TenantQ:
    """A tenant's admission policy as the pure decision reads it."""
    return adm.TenantQ(
        slug=tenant.slug,
        cohort=tenant.cohort,
        weight=Decimal(tenant.weight),
        cpu_quota=tenant.cpu_quota,
        memory_quota_gib=tenant.memory_quota_gib,
        max_dev_clusters_per_user=tenant.max_dev_clusters_per_user,
        max_dev_gpus_per_user=tenant.max_dev_gpus_per_user,
    )


def policy_snapshot(*, tenant: Tenant, flavor: GpuFlavor) -> adm.Snapshot:
    """What says whether a request of ``tenant`` on ``flavor`` could ever fit: the
    tenants of its cohort, their quotas on the flavor and the flavor's fleet size.

    Nothing running or queued is read (two small queries), so submission can ask
    admission's "never fits" question on every request.
    """
    cohort = list(Tenant.objects.unscoped().filter(cohort=tenant.cohort))
    quotas = Quota.objects.unscoped().filter(tenant__in=cohort, flavor=flavor)
    slugs = {t.pk: t.slug for t in cohort}
    return adm.Snapshot(
        now=timezone.now(),
        tenants=[tenant_q(t) for t in cohort],
        flavors=[
            adm.FlavorQ(
                name=flavor.name,
                gpus_per_node=flavor.gpus_per_node,
                node_count=flavor.node_count,
            )
        ],
        quotas=[
            adm.QuotaQ(
                tenant=slugs[q.tenant_id],
                flavor=flavor.name,
                gpus=q.gpus,
                borrow_limit=q.borrow_limit,
            )
            for q in quotas
        ],
    )


def build_snapshot(*, now: datetime | None = None) -> tuple[adm.Snapshot, list[QueuedRow]]:
    """The snapshot of the whole system, and the queued rows it was built from."""
    now = now or timezone.now()
    tenants = list(Tenant.objects.unscoped())
    flavors = list(GpuFlavor.objects.all())
    quotas = list(Quota.objects.unscoped().select_related("tenant", "flavor"))
    holding = list(
        ClusterRequest.objects.unscoped().filter(holds_gpus=True).select_related("tenant", "flavor")
    )
    pending, queued = _queued()
    held: dict[str, Decimal] = defaultdict(Decimal)
    # Admitted clusters whose pods may not be bound yet: the cluster's free figures do
    # not include them, so the pass must not hand their GPUs out a second time.
    unplaced: dict[str, Decimal] = defaultdict(Decimal)
    unplaced_nodes: dict[str, int] = defaultdict(int)
    for row in holding:
        held[row.flavor.name] += row.gpus
        if row.state in (State.ADMITTED, State.PROVISIONING):
            unplaced[row.flavor.name] += row.gpus
            unplaced_nodes[row.flavor.name] += _nodes(row)
    free = {
        f.name: capacity.free_for_admission(
            f, held=held[f.name], unplaced=unplaced[f.name], unplaced_nodes=unplaced_nodes[f.name]
        )
        for f in flavors
    }
    snapshot = adm.Snapshot(
        now=now,
        tenants=[tenant_q(t) for t in tenants],
        flavors=[
            adm.FlavorQ(
                name=f.name,
                gpus_per_node=f.gpus_per_node,
                node_count=f.node_count,
                # The catalogue's GPUs less what admitted clusters hold, and, when the
                # reconciler saw the cluster recently, what is really free there.
                free_gpus=free[f.name][0],
                free_nodes=free[f.name][1],
            )
            for f in flavors
        ],
        quotas=[
            adm.QuotaQ(
                tenant=q.tenant.slug,
                flavor=q.flavor.name,
                gpus=q.gpus,
                borrow_limit=q.borrow_limit,
            )
            for q in quotas
        ],
        running=[
            adm.Running(
                id=r.pk,
                tenant=r.tenant.slug,
                owner=r.owner_id,
                flavor=r.flavor.name,
                kind=r.kind,
                gpus=Decimal(r.gpus),
                cpu=Decimal(r.cpu),
                memory_gib=Decimal(r.memory_gib),
                priority=r.priority,
                admitted_at=r.admitted_at,
                expires_at=r.expires_at,
                nodes=_nodes(r),
                suspend_at=r.reclaim_after,
            )
            for r in holding
        ],
        pending=pending,
        aging=timedelta(seconds=settings.ADMISSION_AGING_SECONDS),
        reclaim_grace=timedelta(seconds=settings.RECLAIM_GRACE_SECONDS),
    )
    return snapshot, queued


def apply_waiting(queued: list[QueuedRow], decision: adm.Decision) -> None:
    """Write position, reason, message and ETA on every request left waiting (if changed).

    On PostgreSQL one UPDATE joins the new values as arrays (``unnest``), so 15,000
    rows cost one statement; elsewhere a pipelined statement per row. Either way only
    rows still ``queued`` are touched.
    """
    changed = []
    for row in queued:
        status = decision.waiting.get(row.id)
        if status is None:
            continue
        values = (
            status.position,
            status.flavor_position,
            status.reason,
            status.message[:500],
            status.eta,
        )
        if values != row.queue:
            row.queue = values
            changed.append(row)
    if not changed:
        return
    table = ClusterRequest._meta.db_table
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            columns = list(zip(*[(r.id, *r.queue) for r in changed], strict=True))
            cursor.execute(
                f"UPDATE {table} AS t SET queue_position = v.pos, "
                "queue_flavor_position = v.fpos, queue_reason = v.reason, "
                "queue_message = v.message, queue_eta = v.eta "
                "FROM unnest(%s::bigint[], %s::integer[], %s::integer[], %s::text[], "
                "%s::text[], %s::timestamptz[]) AS v(id, pos, fpos, reason, message, eta) "
                "WHERE t.id = v.id AND t.state = %s",
                [*(list(c) for c in columns), State.QUEUED.value],
            )
            return
        cursor.executemany(
            f"UPDATE {table} SET queue_position = %s, queue_flavor_position = %s, "
            "queue_reason = %s, queue_message = %s, queue_eta = %s "
            "WHERE id = %s AND state = %s",
            [(*r.queue, r.id, State.QUEUED.value) for r in changed],
        )


def apply_earmarks(decision: adm.Decision, *, now: datetime) -> None:
    """Keep the mark on the requests reclaimed capacity is promised to, drop it elsewhere.

    The next pass reads it (``Pending.earmarked``), so the promise outlives this pass;
    admission clears it (:func:`admit`).
    """
    queued = ClusterRequest.objects.unscoped().filter(state=State.QUEUED)
    queued.filter(pk__in=decision.earmarked, earmarked_at__isnull=True).update(earmarked_at=now)
    queued.filter(earmarked_at__isnull=False).exclude(pk__in=decision.earmarked).update(
        earmarked_at=None
    )


def apply_reclaim(decision: adm.Decision, *, now: datetime) -> list[int]:
    """Warn newly chosen victims, suspend those whose grace ran out, clear the reprieved.

    Returns the ids suspended by this pass. Suspension, never deletion (USERS 9).
    """
    from clusters.services import cluster_suspend

    grace = timedelta(seconds=settings.RECLAIM_GRACE_SECONDS)
    chosen = {r.id: r for r in decision.reclaim}
    warned = ClusterRequest.objects.unscoped().filter(reclaim_after__isnull=False)
    ClusterRequest.objects.unscoped().filter(reclaim_after__isnull=False).exclude(
        pk__in=list(chosen)
    ).update(reclaim_after=None)
    already = {row.pk: row for row in warned.filter(pk__in=list(chosen))}
    suspended: list[int] = []
    for victim_id, reclaim in chosen.items():
        row = already.get(victim_id)
        if row is None:
            row = ClusterRequest.objects.unscoped().filter(pk=victim_id).first()
            if row is None:
                continue
            row.reclaim_after = now + grace
            ClusterRequest.objects.filter(pk=row.pk).update(reclaim_after=row.reclaim_after)
            note(
                row,
                reason="reclaim_warning",
                message=f"{reclaim.message} It will be suspended (not deleted) at "
                f"{row.reclaim_after:%H:%M} UTC unless capacity frees up first.",
            )
        elif (
            row.reclaim_after
            and row.reclaim_after <= now
            and row.state
            in (
                State.PROVISIONING,
                State.READY,
            )
        ):
            cluster_suspend(
                actor=None,
                cluster=row,
                reason="reclaimed",
                message=f"suspended to give {reclaim.for_tenant} its quota back",
            )
            ClusterRequest.objects.filter(pk=row.pk).update(reclaim_after=None)
            suspended.append(row.pk)
    return suspended


def admit(rows: list[ClusterRequest], *, now: datetime) -> list[int]:
    """Move the admitted rows to ``admitted`` (conditional: a row deleted meanwhile stays)."""
    done = []
    for row in rows:
        expires = now + timedelta(hours=row.ttl_hours) if row.ttl_hours else None
        if transition(
            row,
            State.ADMITTED,
            reason="admitted",
            message="admitted; applying its RayCluster",
            admitted_at=now,
            expires_at=expires,
            queue_position=None,
            queue_flavor_position=None,
            queue_reason="",
            queue_message="",
            queue_eta=None,
            earmarked_at=None,
        ):
            done.append(row.pk)
    return done
