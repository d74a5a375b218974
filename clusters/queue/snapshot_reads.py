"""The admission pass's reads: the database as the pure decision sees it.

:func:`build_snapshot` reads one query per table (tenants, flavors, quotas, clusters
holding GPUs, queued clusters) into the pure dataclasses of :mod:`clusters.admission`;
:func:`policy_snapshot` reads only what says whether a request could ever fit. The same
snapshot serves the dry-run, so a verdict is computed by the very code the next pass
runs; :mod:`clusters.queue.writeback` writes a decision back.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, PositiveIntegerField, Q, TextField, Value
from django.db.models.functions import Cast, Coalesce
from django.utils import timezone

from clusters import admission as adm
from clusters.admission.topology_room import packing_level
from clusters.domain.states import State
from clusters.domain.workload_kinds import deadline_paths, kind_named, kind_of
from clusters.models import ClusterKind, ClusterRequest
from clusters.queue import fleet_reads, free_capacity, growth_demand, surge_demand, usage_reads
from clusters.queue.class_reads import Classes, PendingClass, read_classes
from clusters.rows.spec import SPEC_COLUMNS, ClusterSpec
from controlplane.rows import ModelRows
from tenants.models import GpuFlavor, Quota, Tenant
from tenants.selectors import cohort_parents


def _pending(
    *,
    pk: int,
    tenant: str,
    owner: int,
    spec: ClusterSpec,
    gpus: Decimal,
    cpu: Decimal,
    memory_gib: Decimal,
    created_at: datetime,
    earmarked: bool = False,
) -> adm.Pending:
    """The pure view of one request: its demand as charged (an autoscaling cluster at its
    largest size, like its ``gpus``) and its shape from its spec."""
    return adm.Pending(
        id=pk,
        tenant=tenant,
        owner=owner,
        flavor=spec.flavor.name,
        kind=spec.kind,
        gpus=Decimal(gpus),
        created_at=created_at,
        cpu=Decimal(cpu),
        memory_gib=Decimal(memory_gib),
        priority=spec.priority,
        workers=spec.charged_workers(),
        worker_gpus=spec.worker_gpus(),
        ttl=timedelta(hours=spec.ttl_hours) if spec.ttl_hours else None,
        earmarked=earmarked,
        topology_level=spec.topology_level if spec.kind == ClusterKind.PROD else "",
        topology_mode=spec.topology_mode if spec.kind == ClusterKind.PROD else "",
    )


def pending_of(
    row: ClusterRequest, *, pk: int | None = None, classes: Classes | None = None
) -> adm.Pending:
    """The pure view of a queued (or candidate, unsaved) request (``classes``: the
    priority classes, read here if not given)."""
    spec = ClusterSpec.of(row)
    pending = _with_deadline(
        _pending(
            pk=pk if pk is not None else row.pk,
            tenant=row.tenant.slug,
            owner=row.owner_id or 0,
            spec=spec,
            gpus=row.gpus,
            cpu=row.cpu,
            memory_gib=row.memory_gib,
            created_at=row.created_at or timezone.now(),
            earmarked=row.earmarked_at is not None,
        ),
        _deadline_seconds(row),
    )
    wanted, was_on = row.wanted_kube_cluster, row.kube_cluster
    pending = replace(
        pending,
        wanted_cluster=wanted.name if wanted is not None else "",
        wanted_region=row.wanted_region,
        was_on=was_on.name if was_on is not None else "",
        **(classes or read_classes()).pending_fields(row.priority_class_id),
    )
    names = spec.flavor_names()
    if len(names) < 2:
        return pending
    options = flavor_options(spec, GpuFlavor.objects.in_bulk(list(names), field_name="name"))
    return with_options(pending, options)


def _deadline_seconds(row: ClusterRequest) -> int | None:
    """A row's deadline in seconds, if its kind gives it one."""
    return kind_of(row).behaviour.deadline_seconds(row)


def _with_deadline(pending: adm.Pending, deadline_seconds: int | None) -> adm.Pending:
    """A run with a deadline ends by then once it starts (its operator stops it): that is its
    TTL for the queue, which counts on it in the ETAs of what waits behind it."""
    if pending.ttl is not None or not deadline_seconds:
        return pending
    return replace(pending, ttl=timedelta(seconds=deadline_seconds))


def flavor_options(spec: ClusterSpec, by_name: dict[str, GpuFlavor]) -> list[adm.FlavorOption]:
    """What ``spec`` asks of each flavor it accepts, most preferred first: a dev worker
    is one GPU on any of them, but its CPU and memory slice (and a prod worker's whole
    node) differ. A flavor gone from the catalogue is skipped."""
    options = []
    for name in spec.flavor_names():
        flavor = by_name.get(name)
        if flavor is None:
            continue
        on = spec.only_on(flavor)
        need = on.demand()
        options.append(
            adm.FlavorOption(name, need.gpus, need.cpu, need.memory_gib, on.worker_gpus())
        )
    return options


def with_options(pending: adm.Pending, options: list[adm.FlavorOption]) -> adm.Pending:
    """``pending`` accepting ``options`` in order: the first is its own flavor and demand
    (while it waits, the first preference, whatever flavor it last ran on)."""
    if not options:
        return pending
    return pending.on(options[0], fallbacks=tuple(options[1:]))


@dataclass
class QueuedRow:
    """A queued request as the pass reads it: its id and its current queue fields.

    Read as plain values (not model instances): at 15,000 waiting requests, building
    model objects and parsing their every column is most of a pass's cost.
    """

    id: int
    queue: tuple[int | None, int | None, str, str, datetime | None, list[dict[str, Any]]]


_QUEUE_FIELDS = (
    "queue_position",
    "queue_flavor_position",
    "queue_reason",
    "queue_message",
    "queue_eta",
    "queue_flavors",
)


# The spec columns that shape a request as admission sees it (its name does not).
_SHAPE_COLUMNS = tuple(c for c in SPEC_COLUMNS if c != "name")


@dataclass(frozen=True)
class _Shape:
    """What a queued request's spec contributes to its pure view, computed once per
    distinct shape: a long queue holds thousands of rows of a few dozen shapes."""

    flavor: str
    kind: str
    priority: int
    workers: int
    worker_gpus: Decimal
    ttl: timedelta | None
    # Every flavor it accepts with its demand there, when it accepts more than one.
    options: list[adm.FlavorOption]
    # A production gang's topology wish (docs/topology.md).
    topology_level: str = ""
    topology_mode: str = ""


def _shape(flavor: GpuFlavor, values: dict[str, Any], by_name: dict[str, GpuFlavor]) -> _Shape:
    spec = ClusterSpec(flavor=flavor, **{c: values[c] for c in _SHAPE_COLUMNS if c != "flavor_id"})
    many = len(spec.flavor_names()) > 1
    return _Shape(
        flavor=flavor.name,
        kind=spec.kind,
        priority=spec.priority,
        workers=spec.charged_workers(),
        worker_gpus=spec.worker_gpus(),
        ttl=timedelta(hours=spec.ttl_hours) if spec.ttl_hours else None,
        options=flavor_options(spec, by_name) if many else [],
        topology_level=spec.topology_level if spec.kind == ClusterKind.PROD else "",
        topology_mode=spec.topology_mode if spec.kind == ClusterKind.PROD else "",
    )


def _shape_key(values: dict[str, Any]) -> tuple[object, ...]:
    """A running row's shape (``accepted_flavors`` as a tuple, to be hashable)."""
    return tuple(
        tuple(values[c] or ()) if c == "accepted_flavors" else values[c] for c in _SHAPE_COLUMNS
    )


def _deadline() -> Any:
    """A row's run deadline in seconds, from its kind's own table (NULL for a kind
    without one)."""
    paths = deadline_paths()
    if not paths:
        return Value(None, output_field=PositiveIntegerField())
    return Coalesce(*paths) if len(paths) > 1 else F(paths[0])


# What a queued request asks of placement, and where it last ran (a resumed request).
_PLACEMENT_FIELDS = ("wanted_kube_cluster_id", "wanted_region", "kube_cluster_id")
# The JSON columns the queue read takes as their text: parsed once per shape (accepted
# flavors) or only when not empty (the standing), not once per row by the ORM.
_AS_TEXT = {
    "accepted_text": Cast("accepted_flavors", TextField()),
    "standing_text": Cast("queue_flavors", TextField()),
}
# The queue read's columns, as one tuple per row: the request's own, its shape (a slice
# of the tuple, the memo's key), then its current queue fields.
_OWN_COLUMNS = (
    "id",
    "tenant__slug",
    "owner_id",
    "gpus",
    "cpu",
    "memory_gib",
    "created_at",
    "earmarked_at",
    "capacity_state",
    "priority_class_id",
    "deadline",
    *_PLACEMENT_FIELDS,
)
_SHAPE_TEXT = tuple("accepted_text" if c == "accepted_flavors" else c for c in _SHAPE_COLUMNS)
_SHAPE_AT = len(_OWN_COLUMNS)
_QUEUE_AT = _SHAPE_AT + len(_SHAPE_TEXT)
_QUEUED_COLUMNS = (*_OWN_COLUMNS, *_SHAPE_TEXT, *_QUEUE_FIELDS[:-1], "standing_text")


def _from_text(text: str) -> list[Any]:
    """A JSON list column read as text (``[]`` needs no parsing: most rows have it)."""
    return [] if text == "[]" else list(json.loads(text))


def _queued(
    flavors: dict[int, GpuFlavor], members: dict[int, str], classes: Classes
) -> tuple[list[adm.Pending], list[QueuedRow]]:
    """Every queued request that is not held, as the pure pass sees it, and its current
    queue fields (what the pass compares its own with before writing).

    Read as tuples, not dicts or model instances: at 15,000 waiting requests the work
    done per row is most of the snapshot's cost, so what is the same for many rows (the
    shape, the class) is computed once.
    """
    pending: list[adm.Pending] = []
    rows: list[QueuedRow] = []
    memo: dict[tuple[object, ...], _Shape] = {}
    by_name = {f.name: f for f in flavors.values()}
    of_class: dict[int | None, PendingClass] = {}
    for row in (
        ClusterRequest.objects.unscoped()
        .filter(state=State.QUEUED, held_at__isnull=True)  # a held request waits aside
        .annotate(deadline=_deadline(), **_AS_TEXT)
        .values_list(*_QUEUED_COLUMNS)
    ):
        pk, tenant, owner, gpus, cpu, memory_gib, created_at, earmarked_at = row[:8]
        capacity_state, class_id, deadline, wanted, wanted_region, was_on = row[8:_SHAPE_AT]
        key = row[_SHAPE_AT:_QUEUE_AT]
        shape = memo.get(key)
        if shape is None:
            values = dict(zip(_SHAPE_COLUMNS, key, strict=True))
            values["accepted_flavors"] = _from_text(values["accepted_flavors"])
            shape = memo[key] = _shape(flavors[values["flavor_id"]], values, by_name)
        klass = of_class.get(class_id)
        if klass is None:
            klass = of_class[class_id] = classes.pending_fields(class_id)
        # The same fields as :func:`_pending`, without a spec per row.
        request = adm.Pending(
            id=pk,
            tenant=tenant,
            owner=owner,
            flavor=shape.flavor,
            kind=shape.kind,
            gpus=Decimal(gpus),
            created_at=created_at,
            cpu=Decimal(cpu),
            memory_gib=Decimal(memory_gib),
            priority=shape.priority,
            workers=shape.workers,
            worker_gpus=shape.worker_gpus,
            ttl=shape.ttl,
            earmarked=earmarked_at is not None,
            # Nodes the cluster autoscaler provisioned for it (capacity on demand).
            booked=shape.flavor if capacity_state == "provisioned" else "",
            wanted_cluster=members.get(wanted, ""),
            wanted_region=wanted_region,
            was_on=members.get(was_on, ""),
            topology_level=shape.topology_level,
            topology_mode=shape.topology_mode,
            **klass,
        )
        if deadline:
            request = _with_deadline(request, deadline)
        pending.append(with_options(request, shape.options) if shape.options else request)
        position, flavor_position, reason, message, eta, standing = row[_QUEUE_AT:]
        queue = (position, flavor_position, reason, message, eta, _from_text(standing))
        rows.append(QueuedRow(pk, queue))
    return pending, rows


_HOLDING_FIELDS = (
    "id",
    "tenant__slug",
    "owner_id",
    "workload",
    "state",
    *_SHAPE_COLUMNS,  # flavor_id among them
    "gpus",
    "cpu",
    "memory_gib",
    "admitted_at",
    "expires_at",
    "reclaim_after",
    "kube_cluster_id",
    "topology_domain",
    "name",
    "priority_class_id",
    "ready_at",
    "checkpointed_at",
)


def _pinned_level(values: dict[str, Any], flavor: GpuFlavor) -> str:
    """The level of the domain a running gang's workers were pinned to: the one it asked
    for, else (a gang that asked none, packed into a domain) its flavor's packing level."""
    if not values["topology_domain"]:
        return ""
    return values["topology_level"] or packing_level(flavor.topology or ())


def _running(
    flavors: dict[int, GpuFlavor], members: dict[int, str], classes: Classes
) -> list[tuple[adm.Running, str]]:
    """Every request that holds GPUs as the pure pass sees it, with its state.

    Read as plain values, as :func:`_queued` reads the queue: a pass runs again after
    every burst of requests, and a model object (with its tenant, flavor and details) for
    each of a thousand running clusters would cost more than the pass itself.
    """
    nodes_of: dict[tuple[object, ...], int] = {}
    running = []
    for values in (
        ClusterRequest.objects.unscoped()
        .filter(holds_gpus=True)
        .values(*_HOLDING_FIELDS, deadline=_deadline())
    ):
        nodes = 0
        kind = kind_named(values["workload"])
        if values["kind"] == ClusterKind.PROD:
            # Whole nodes a prod cluster is charged for: its workers at their largest.
            key = _shape_key(values)
            if key not in nodes_of:
                spec = ClusterSpec(
                    flavor=flavors[values["flavor_id"]],
                    **{c: values[c] for c in _SHAPE_COLUMNS if c != "flavor_id"},
                )
                nodes_of[key] = spec.charged_workers()
            nodes = nodes_of[key]
        deadline = values["deadline"]
        admitted_at = values["admitted_at"]
        ends = admitted_at + timedelta(seconds=deadline) if deadline and admitted_at else None
        row = adm.Running(
            id=values["id"],
            tenant=values["tenant__slug"],
            owner=values["owner_id"],
            flavor=flavors[values["flavor_id"]].name,
            kind=values["kind"],
            gpus=Decimal(values["gpus"]),
            cpu=Decimal(values["cpu"]),
            memory_gib=Decimal(values["memory_gib"]),
            priority=values["priority"],
            admitted_at=admitted_at,
            expires_at=values["expires_at"] or ends,
            nodes=nodes,
            suspend_at=values["reclaim_after"],
            reclaimable=kind.reclaimable,
            preemptible=kind.preemptible,
            cluster=members.get(values["kube_cluster_id"], ""),
            topology_level=_pinned_level(values, flavors[values["flavor_id"]]),
            topology_domain=values["topology_domain"],
            name=values["name"],
            # Its minimum run time counts from when it was ready (else admitted).
            **classes.running_fields(
                values["priority_class_id"],
                started=values["ready_at"] or admitted_at,
                checkpointed_at=values["checkpointed_at"],
            ),
        )
        running.append((row, values["state"]))
    return running


def _parked() -> list[adm.Parked]:
    """Suspended dev clusters and held dev requests, which count against their owners'
    caps (a hold must not let an engineer queue more than the caps allow)."""
    parked = Q(state=State.SUSPENDED) | Q(state=State.QUEUED, held_at__isnull=False)
    return [
        adm.Parked(tenant=v["tenant__slug"], owner=v["owner_id"], gpus=Decimal(v["gpus"]))
        for v in ClusterRequest.objects.unscoped()
        .filter(parked, kind=ClusterKind.DEV)
        .values("tenant__slug", "owner_id", "gpus")
    ]


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


def flavor_q(flavor: GpuFlavor, **free: Any) -> adm.FlavorQ:
    """A catalogue row as the admission pass sees it, with what is ``free`` of it."""
    seen = flavor.observed_free_domains or {}
    levels = list(flavor.topology or ())
    largest = seen.get("largest") if seen.get("levels") == levels else None
    return adm.FlavorQ(
        name=flavor.name,
        gpus_per_node=flavor.gpus_per_node,
        node_count=flavor.most_nodes,
        topology=tuple(levels),
        largest_domains=tuple((k, int(n)) for k, n in (largest or {}).items() if k in levels),
        **free,
    )


def quota_q(quota: Quota, *, tenant: str, flavor: str) -> adm.QuotaQ:
    """A quota row as the admission pass sees it (``tenant`` and ``flavor`` by name, read
    by the caller without a query each)."""
    return adm.QuotaQ(
        tenant=tenant,
        flavor=flavor,
        gpus=quota.gpus,
        borrow_limit=quota.borrow_limit,
        lend_limit=quota.lend_limit,
    )


def policy_snapshot(
    *,
    tenant: Tenant,
    flavor: GpuFlavor,
    alone: bool = False,
    own_quota: list[Quota] | None = None,
) -> adm.Snapshot:
    """What says whether a request of ``tenant`` on ``flavor`` could ever fit: the
    tenants of its cohort's tree, their quotas on the flavor and the flavor's fleet size.

    Nothing running or queued is read (three small queries), so submission can ask
    admission's "never fits" question on every request. ``alone``: the tenant and its
    own quota only, as if it had no cohort (one query, none when ``own_quota``, its
    quota row on ``flavor`` or none, was read already); what fits there fits with the
    cohort too, since a cohort only adds what the tenant may borrow.
    """
    quotas: Any
    if alone:
        parents: dict[str, str] = {}
        cohort = [tenant]
        quotas = own_quota if own_quota is not None else _own_quota(tenant, flavor)
    else:
        parents = cohort_parents()
        root = adm.cohort_root(tenant.cohort, parents)
        tree = {root, *(name for name in parents if adm.cohort_root(name, parents) == root)}
        cohort = list(Tenant.objects.unscoped().filter(cohort__in=tree))
        quotas = Quota.objects.unscoped().filter(tenant__in=cohort, flavor=flavor)
    slugs = {t.pk: t.slug for t in cohort}
    return adm.Snapshot(
        now=timezone.now(),
        tenants=[tenant_q(t) for t in cohort],
        flavors=[flavor_q(flavor)],
        quotas=[quota_q(q, tenant=slugs[q.tenant_id], flavor=flavor.name) for q in quotas],
        cohort_parents=parents,
    )


def _own_quota(tenant: Tenant, flavor: GpuFlavor) -> list[Quota]:
    """The tenant's quota row on ``flavor`` (none or one), in plain SQL
    (:mod:`controlplane.rows`): every create asks "could it ever fit?" under the tenant's
    lock, and compiling the ORM query cost more than running it."""
    quotas = ModelRows(Quota, "q")
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {quotas.columns} FROM {Quota._meta.db_table} q "
            "WHERE q.tenant_id = %s AND q.flavor_id = %s",
            [tenant.pk, flavor.pk],
        )
        return [quotas.build(row) for row in cursor.fetchall()]


def _without_jit() -> None:
    """Turn PostgreSQL's JIT compiler off until the transaction ends (a no-op elsewhere).

    The snapshot's joins over small tables that were never analysed (a fleet of one
    member) are estimated at a million rows: compiling such a query took 260 ms, running
    it a millisecond. Nothing the snapshot reads runs long enough for JIT to pay.
    """
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT set_config('jit', 'off', true)")


def build_snapshot(*, now: datetime | None = None) -> tuple[adm.Snapshot, list[QueuedRow]]:
    """The snapshot of the whole system, and the queued rows it was built from (requests'
    surges are in it too, under their own ids: :mod:`clusters.queue.surge_demand`).

    Read in a transaction (the pass's, else its own), without JIT.
    """
    with transaction.atomic():
        _without_jit()
        return _read_snapshot(now or timezone.now())


def _read_snapshot(now: datetime) -> tuple[adm.Snapshot, list[QueuedRow]]:
    tenants = list(Tenant.objects.unscoped())
    flavors = list(GpuFlavor.objects.all())
    quotas = list(Quota.objects.unscoped().select_related("tenant", "flavor"))
    by_pk = {f.pk: f for f in flavors}
    fleet = fleet_reads.read_fleet()
    names = fleet.names
    classes = read_classes()  # once per pass: every class, and the default
    running = _running(by_pk, names, classes)
    pending, queued = _queued(by_pk, names, classes)
    # Surges (a service's upgrade to a new Ray cluster): queued demand and GPUs held.
    surging = surge_demand.read()
    pending += surging.waiting
    extra = [(r, State.ADMITTED if unplaced else State.READY) for r, unplaced in surging.holding]
    # Growths (a service beyond its guaranteed size): queued demand and borrowable GPUs.
    growing, grown = growth_demand.read(now)
    pending += growing
    extra += [(r, State.READY) for r in grown]
    # A surge or growth runs where its request runs, and is placed nowhere else.
    where = {r.id: r.cluster for r, _ in running}
    running += [(replace(r, cluster=where.get(adm.extra_of(r.id)[1], "")), s) for r, s in extra]
    pending = [
        replace(p, wanted_cluster=where.get(adm.extra_of(p.id)[1], "")) if p.id < 0 else p
        for p in pending
    ]
    held: dict[str, Decimal] = defaultdict(Decimal)
    # Admitted clusters whose pods may not be bound yet: the cluster's free figures do
    # not include them, so the pass must not hand their GPUs out a second time.
    unplaced: dict[str, Decimal] = defaultdict(Decimal)
    unplaced_nodes: dict[str, int] = defaultdict(int)
    for r, state in running:
        held[r.flavor] += r.gpus
        if state in (State.ADMITTED, State.PROVISIONING):
            unplaced[r.flavor] += r.gpus
            unplaced_nodes[r.flavor] += r.nodes
    free = {
        f.name: free_capacity.free_for_admission(
            f, held=held[f.name], unplaced=unplaced[f.name], unplaced_nodes=unplaced_nodes[f.name]
        )
        for f in flavors
    }
    not_bound = (State.ADMITTED, State.PROVISIONING)
    domains = {
        f.name: fleet_reads.free_domains_of(
            f, f, free[f.name][1], [r for r, state in running if state in not_bound]
        )
        for f in flavors
    }
    members = fleet_reads.members(
        fleet,
        flavors,
        free,
        ((r, r.cluster, state in not_bound) for r, state in running),
        fleet_domains=domains,
    )
    snapshot = adm.Snapshot(
        now=now,
        tenants=[tenant_q(t) for t in tenants],
        # The catalogue's GPUs less what admitted clusters hold, and, when the reconciler
        # saw the cluster recently, what is really free there.
        flavors=[
            flavor_q(
                f,
                free_gpus=free[f.name][0],
                free_nodes=free[f.name][1],
                free_node_domains=domains[f.name],
            )
            for f in flavors
        ],
        quotas=[quota_q(q, tenant=q.tenant.slug, flavor=q.flavor.name) for q in quotas],
        running=[r for r, _ in running],
        pending=pending,
        parked=_parked(),
        aging=timedelta(seconds=settings.ADMISSION_AGING_SECONDS),
        reclaim_grace=timedelta(seconds=settings.RECLAIM_GRACE_SECONDS),
        cohort_parents=cohort_parents(),
        members=members,
        recent=usage_reads.read_recent_usage(now=now, half_life=usage_reads.half_life()),
    )
    return snapshot, queued
