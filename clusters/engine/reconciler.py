"""The reconciler: one pass folds a member's truth into its rows and repairs drift.

A pass is over one member of the fleet and its rows (:mod:`.member_scope`; one per
member side by side: :mod:`.member_passes`). It reads every kind of object from the
informers' caches (:mod:`.informers`) or one
LIST per kind, records free GPUs per flavor, then folds every row that may have changed
(:mod:`.foldmemo`) through its kind's ``engine.fold``. It never calls an object missing
from LISTs older than its row's last move (:func:`_listed_after`); it keeps each
tenant's bundle, folds the autoscaler's answers and deletes orphans, and returns what it
did so the task can run an admission pass when capacity freed.
"""

from __future__ import annotations

import gc
import logging
import os
import time
from collections import defaultdict
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import connection
from django.utils import timezone

from clusters.domain.states import State
from clusters.domain.workload_kinds import kind_named, kind_of, kinds, row_relations
from clusters.engine import foldmemo, informers, preemption_notice, scale_up
from clusters.engine.deletion import DELETED_MESSAGE, RELEASED_MESSAGE
from clusters.engine.member_scope import MemberScope
from clusters.engine.pass_state import Fold, Report, Seen
from clusters.kube import labels
from clusters.kube.bundles import ensure_bundle, forget_bundle, quotas_by_tenant
from clusters.kube.gateway import Gateway, KubeError
from clusters.models import ClusterRequest, KubeCluster
from clusters.queue import free_capacity, free_devices, free_domains
from clusters.queue.backends import queue_backend
from clusters.queue.interface import QueueBackend, QueueView
from clusters.rows.transitions import release_gpus_many, transition_many
from controlplane import metrics
from tenants.models import GpuFlavor, Tenant

log = logging.getLogger(__name__)

# A row whose object is missing from a cache that is not known fresh past the row's move
# waits for the next pass; once the move is this old, the pass GETs that one object
# instead. A busy kind's cache catches up within a pass's wait (0.1 s); one still behind
# after this belongs to a quiet kind, which only the grace would make fresh (2 s), and
# the end of a burst of deletes waited for it and then for beat's pass, 4.5 s in all.
READ_THROUGH_AFTER = timedelta(seconds=0.5)
# At most this many direct reads per pass (the others wait for the next pass).
MAX_READ_THROUGH = 50


# The session-level advisory lock that keeps reconcile passes one at a time.
_LOCK_KEY = 0x6761_6E68  # "ganh"


def reconcile_exclusive(
    gw: Gateway | None = None, *, member: KubeCluster | None = None
) -> Report | None:
    """:func:`reconcile_once` over ``member`` (``None``: the home member) unless another
    pass over it is running (then ``None``).

    Two passes at once would be safe (every write is idempotent or conditional) but
    would double the load for nothing; the caller asks for a pass again instead. Passes
    over different members run side by side (each holds its member's lock).
    """
    scope = MemberScope.of(member)
    if connection.vendor != "postgresql":
        return reconcile_once(gw, scope=scope)  # SQLite (make run): one solo worker
    # The home member keeps the lock of the pass from before the fleet.
    key = [_LOCK_KEY] if scope.home else [_LOCK_KEY, scope.member.pk]  # type: ignore[union-attr]
    held = ", ".join(["%s"] * len(key))
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT pg_try_advisory_lock({held})", key)
        row = cursor.fetchone()
    if not (row and row[0]):
        return None
    try:
        return reconcile_once(gw, scope=scope)
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT pg_advisory_unlock({held})", key)


@contextmanager
def _without_cycle_collection() -> Iterator[None]:
    """Pause the cyclic garbage collector for a pass: the decoded LISTs are millions
    of small objects that every full collection would walk, and plain JSON has no
    cycles (reference counting frees it)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def reconcile_once(gw: Gateway | None = None, *, scope: MemberScope | None = None) -> Report:
    """One reconcile pass over the rows of ``scope``'s member (``None``: the home
    member's), through ``gw`` (``None``: that member's gateway); see the module
    docstring."""
    scope = scope or MemberScope.of(None)
    member = scope.name or "home"
    started = time.monotonic()
    with _without_cycle_collection():
        report = _reconcile(gw or scope.gateway(), scope)
    # A pass that raised is not counted: its lag keeps growing, which is what alerts.
    metrics.RECONCILE_SECONDS.labels(member).observe(time.monotonic() - started)
    metrics.RECONCILE_LAST.labels(member).set(time.time())
    return report


def _reconcile(gw: Gateway, scope: MemberScope) -> Report:
    backend = queue_backend()
    report = Report()
    seen = _observe(gw, scope)  # before the rows: an object listed has its row read below
    report.capacity_grew = seen.capacity_grew
    now = timezone.now()
    live = foldmemo.live_rows(scope)
    tenants = Tenant.objects.in_bulk({row.tenant_id for row in live})
    memo = (
        foldmemo.memo_of(scope.name, scope.home)
        if foldmemo.skips_allowed(backend.folds_incrementally)
        else None
    )
    if memo is not None:
        memo.begin()
    plan = _plan(live, tenants, seen, backend, memo, now)
    report.skipped = len(live) - len(plan.stamps)
    for tenant in tenants.values():
        if tenant.namespace not in seen.namespaces:
            forget_bundle(tenant.pk, gw.member)
            backend.forget_applied()
    rows = _rows_to_fold(plan.stamps, len(live), tenants, scope)
    view = backend.observe(gw, rows)
    quiet, acted = _fold_rows(rows, plan.stamps, seen, gw, backend, view, report, now)
    _write_batch(report, now)
    try:
        report.provisioned = scale_up.fold_capacity(rows, gw)
    except KubeError as exc:
        report.errors.append(f"capacity requests: {exc.message}")
    _keep_bundles(live, tenants, gw, report)
    for object_kind, keys in view.also_wanted().items():
        plan.wanted[object_kind] |= keys
    _delete_orphans(seen, plan.wanted, gw, report)
    if memo is not None:
        # Only now: a pass cut short by an error must not leave rows remembered as
        # settled whose bulk writes never happened.
        memo.settle(quiet, acted, (row.pk for row in live))
    return report


@dataclass
class _Plan:
    """What a pass folds (row id -> its stamps; ``None``: folded whatever they are) and
    the objects the live rows want (the others are orphans)."""

    stamps: dict[int, Any] = field(default_factory=dict)
    # Keys of the objects live rows want, by object kind.
    wanted: dict[str, set[tuple[str, str]]] = field(default_factory=lambda: defaultdict(set))


def _plan(
    live: list[foldmemo.LiveRow],
    tenants: dict[int, Tenant],
    seen: Seen,
    backend: QueueBackend,
    memo: foldmemo.FoldMemo | None,
    now: Any,
) -> _Plan:
    """Choose the rows to fold from every live row's stamps (all of them without a memo)."""
    plan = _Plan()
    for live_row in live:
        tenant = tenants.get(live_row.tenant_id)
        if tenant is None:
            continue  # deleted since the rows were read, and they with it
        key = (tenant.namespace, live_row.name)
        kind = kind_named(live_row.workload)
        behaviour = kind.behaviour
        if behaviour.wants_object(live_row.state, backend):
            plan.wanted[kind.object_kind].add(key)
        if memo is None or foldmemo.always_folded(live_row, now):
            plan.stamps[live_row.pk] = None
            continue
        stamp = (live_row.stamp, behaviour.objects_stamp(seen, key, live_row.pk))
        if not memo.unchanged(live_row.pk, stamp):
            plan.stamps[live_row.pk] = stamp
    return plan


def _fold_rows(
    rows: list[ClusterRequest],
    stamps: dict[int, Any],
    seen: Seen,
    gw: Gateway,
    backend: QueueBackend,
    view: QueueView,
    report: Report,
    now: Any,
) -> tuple[dict[int, Any], list[int]]:
    """Fold each row; returns the rows folded without effect (with their stamps) and
    the others."""
    quiet: dict[int, Any] = {}
    acted: list[int] = []
    report.read_through = _read_through(rows, seen, gw, now)
    for cluster in rows:
        key = (cluster.namespace, cluster.name)
        effects = _effects(report, gw)
        try:
            if not _listed_after(cluster, seen, key):
                report.deferred.append(cluster.pk)
                continue
            fold = Fold(seen, key, gw, backend, view, report, now)
            kind_of(cluster).behaviour.fold(cluster, fold)
            preemption_notice.sync(cluster, seen.pods_by_id.get(cluster.pk, []), gw)
        except KubeError as exc:
            report.errors.append(f"{cluster}: {exc.message}")
            log.warning("reconcile %s: %s", cluster, exc.message)
        finally:
            stamp = stamps.get(cluster.pk)
            if stamp is not None and _effects(report, gw) == effects:
                quiet[cluster.pk] = stamp
            else:
                acted.append(cluster.pk)
    report.folded = len(rows)
    return quiet, acted


def _rows_to_fold(
    stamps: dict[int, Any], live: int, tenants: dict[int, Tenant], scope: MemberScope
) -> list[ClusterRequest]:
    """The rows this pass folds, with what folding them reads. Their tenants are the
    ones the pass read already (a row whose tenant came after is left to the next pass)."""
    if not stamps:
        return []
    # prefetch, not select_related: a few flavors and owners shared by thousands of
    # rows are read once each instead of once per row.
    query = ClusterRequest.objects.unscoped().prefetch_related("flavor", "owner", *row_relations())
    if len(stamps) == live:
        # All of them (the first pass, a full pass, SQLite, Kueue): no list of ids.
        rows = list(query.filter(scope.rows()).not_deleted())
    else:
        rows = list(query.filter(pk__in=list(stamps)).not_deleted())
    folded = [row for row in rows if row.tenant_id in tenants]
    for row in folded:
        row.tenant = tenants[row.tenant_id]
    return folded


def _read_through(rows: list[ClusterRequest], seen: Seen, gw: Gateway, now: datetime) -> int:
    """GET the object of each row the pass would defer (``_listed_after``) whose move is
    :data:`READ_THROUGH_AFTER` old, at most :data:`MAX_READ_THROUGH`; returns how many.

    A GET answers from the API server as of now, after the row's move (the row was read
    after this pass began): what it finds is folded as a LIST's item would be, and what
    it does not find is known missing (``seen.confirmed_missing``). A failed GET leaves
    the row deferred. Pods still come from the caches: those whose absence finishes
    a deletion were written long before the row moved.
    """
    due = now - READ_THROUGH_AFTER
    doubtful = [
        row
        for row in rows
        if row.provision_requested_at is None
        and row.progress_at <= due
        and not _listed_after(row, seen, (row.namespace, row.name))
    ]
    read = 0
    for row in sorted(doubtful, key=lambda row: row.progress_at)[:MAX_READ_THROUGH]:
        key = (row.namespace, row.name)
        kind = kind_of(row)
        try:
            obj = gw.get(kind.api_version, kind.object_kind, row.name, row.namespace)
        except KubeError as exc:
            log.info("read %s %s directly: %s", kind.object_kind, key, exc.message)
            continue
        read += 1
        if obj is None:
            seen.confirmed_missing.add((kind.object_kind, key))
        else:
            seen.objects.setdefault(kind.object_kind, {})[key] = obj
    return read


def _listed_after(cluster: ClusterRequest, seen: Seen, key: tuple[str, str]) -> bool:
    """Whether this pass's LISTs may say the row's object is missing: not if they began
    before the row's last move or while it waits for its provision pass, since the
    object may be written after (acting on it would apply it twice, finish a deletion
    early, or call a running job vanished). Such a row waits for a newer pass."""
    object_kind = kind_of(cluster).object_kind
    if seen.object(object_kind, key) is not None:
        return True
    if (object_kind, key) in seen.confirmed_missing:
        return True
    listed_at = seen.listed_at[object_kind]
    return cluster.provision_requested_at is None and cluster.progress_at < listed_at


def _effects(report: Report, gw: Gateway) -> tuple[int, ...]:
    """How much a pass has done so far: a row's fold changed nothing when this is the
    same after it (its own row writes change its stamp anyway)."""
    batch = report.batch
    return (
        gw.writes,
        len(report.recreated),
        len(report.expired),
        len(report.evicted),
        len(report.released),
        len(report.errors),
        len(report.deferred),
        len(batch.to_ready),
        len(batch.to_release),
        sum(len(rows) for rows in batch.to_delete.values()),
        sum(len(pks) for pks in batch.reasons.values()),
    )


def _write_batch(report: Report, now: Any) -> None:
    """Move the rows found ready or gone, give back finished runs' GPUs and record the
    new waiting reasons, in bulk."""
    for reason, rows in report.batch.to_delete.items():
        gone = transition_many(
            rows, State.DELETED, reason=reason, message=DELETED_MESSAGE, deleted_at=now
        )
        report.deleted.extend(c.pk for c in gone)
    moved = transition_many(
        report.batch.to_ready,
        State.READY,
        reason="ready",
        message="head and workers are ready",
        ready_at=now,
    )
    report.ready.extend(c.pk for c in moved)
    released = release_gpus_many(report.batch.to_release, message=RELEASED_MESSAGE)
    report.released.extend(c.pk for c in released)
    for (state, reason), pks in report.batch.reasons.items():
        ClusterRequest.objects.filter(pk__in=pks, state=state).update(state_reason=reason)


def _observe(gw: Gateway, scope: MemberScope) -> Seen:
    """Every kind a pass reads: from the informers' caches where their watch is open
    (:mod:`clusters.engine.informers`), else one LIST per kind, issued concurrently;
    records the free GPU capacity per flavor.

    The LISTs run in parallel because the pass mostly waits: while the API server
    encodes one kind, this process decodes another.
    """
    started = timezone.now()
    flavors = list(GpuFlavor.objects.all())
    lists = _lists(dra=any(f.uses_dra for f in flavors))
    cache = informers.caches(lists, scope)
    views = cache.read(gw) if cache is not None else {}
    missing = {what: spec for what, spec in lists.items() if what not in views}
    pool = _list_threads(len(lists), scope.name)
    futures = {
        what: (
            pool.submit(gw.list_if_served, api_version, kind)
            if what in DRA_LISTS
            else pool.submit(gw.list, api_version, kind, **selectors)
        )
        for what, (api_version, kind, selectors) in missing.items()
    }
    results = {what: view.items for what, view in views.items()}
    results.update({what: future.result() for what, future in futures.items()})

    # What a row's fold may call missing (its kind's object) is as fresh as that kind's
    # cache (a LIST holds what was written before it began), each by its own: a quiet
    # kind's cache is known fresh only up to the grace. The pods whose absence finishes
    # a deletion were written long before the row moved to deleting, so a cache has them.
    def fresh(what: str) -> datetime:
        if what not in views:
            return started
        return min(started, datetime.fromtimestamp(views[what].fresh_at, tz=UTC))

    object_kinds = {kind.object_kind for kind in kinds().values()}
    all_pods = results["pods"]
    devices = free_devices.free_by_flavor(
        flavors,
        results["nodes"],
        results.get("resourceslices", []),
        results.get("resourceclaims", []),
        results.get("deviceclasses", []),
    )
    capacity_grew = free_capacity.record(
        free_capacity.free_by_product(results["nodes"], all_pods),
        member=scope.member,
        devices=devices,
        flavors=flavors,
    )
    free_domains.record(
        free_domains.free_domains_by_flavor(flavors, results["nodes"], all_pods),
        flavors=flavors,
        member=scope.member,
    )
    managed_key, managed_value = labels.managed_selector().split("=", 1)
    pods: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    pods_by_id: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for pod in all_pods:
        meta = pod["metadata"]
        pod_labels = meta.get("labels") or {}
        if pod_labels.get(managed_key) == managed_value:
            pods[(meta["namespace"], pod_labels.get("ray.io/cluster", ""))].append(pod)
            request_id = pod_labels.get(labels.CLUSTER_ID, "")
            if request_id.isdigit():
                pods_by_id[int(request_id)].append(pod)
    events = {
        (event.get("involvedObject") or {}).get("uid", ""): event for event in results["events"]
    }
    return Seen(
        objects={
            what: {(o["metadata"]["namespace"], o["metadata"]["name"]): o for o in results[what]}
            for what in object_kinds
        },
        pods=pods,
        pods_by_id=pods_by_id,
        namespaces={ns["metadata"]["name"] for ns in results["namespaces"]},
        events=events,
        listed_at={what: fresh(what) for what in object_kinds},
        capacity_grew=capacity_grew,
    )


_THREADS: dict[str, tuple[int, ThreadPoolExecutor]] = {}


def _list_threads(size: int, member: str) -> ThreadPoolExecutor:
    """The threads passes over ``member`` list with, kept for the life of the process
    (made again in a forked child, which has none of its parent's threads). Threads
    made for each pass each opened their own connections to the shared cache (Django's
    caches are per thread), a few times a second during a burst. Each member has its
    own: a slow member's LISTs must not queue another member's behind them."""
    found = _THREADS.get(member)
    if found is None or found[0] != os.getpid():
        pool = ThreadPoolExecutor(max_workers=size, thread_name_prefix=f"reconcile-list{member}")
        found = _THREADS[member] = (os.getpid(), pool)
    return found[1]


# What a pass lists besides when a flavor claims its GPUs through DRA: the devices the
# drivers publish, the claims holding them and the classes that select them (a cluster
# that does not serve resource.k8s.io/v1 has none).
DRA_LISTS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "resourceslices": ("resource.k8s.io/v1", "ResourceSlice", {}),
    "resourceclaims": ("resource.k8s.io/v1", "ResourceClaim", {}),
    "deviceclasses": ("resource.k8s.io/v1", "DeviceClass", {}),
}


def _lists(*, dra: bool = False) -> dict[str, tuple[str, str, dict[str, Any]]]:
    """What a pass lists: apiVersion, kind and selectors, by name (each workload kind's
    objects under their kind; with ``dra``, :data:`DRA_LISTS` too)."""
    managed = {"label_selector": labels.managed_selector()}
    objects = {
        kind.object_kind: (kind.api_version, kind.object_kind, managed) for kind in kinds().values()
    }
    return {
        **objects,
        # Every pod, not only ours: the free capacity per GPU flavor counts them all.
        "pods": ("v1", "Pod", {}),
        "nodes": ("v1", "Node", {}),
        "namespaces": ("v1", "Namespace", managed),
        # Filtered by the API server: a busy cluster has many times more events of other
        # reasons (Scheduled, Pulled, Started, ...) than the few this pass reads.
        "events": (
            "v1",
            "Event",
            {"field_selector": "involvedObject.kind=Pod,reason=FailedScheduling"},
        ),
        **(DRA_LISTS if dra else {}),
    }


def _keep_bundles(
    live: list[foldmemo.LiveRow], tenants: dict[int, Tenant], gw: Gateway, report: Report
) -> None:
    """Keep every namespace bundle in step with its tenant's quota (a no-op unless the
    quota changed or the namespace vanished: ensure_bundle remembers what it applied).
    The quota rows of every tenant are read in one query, not one per tenant."""
    needing = {
        row.tenant_id: tenants[row.tenant_id]
        for row in live
        if row.tenant_id in tenants and kind_named(row.workload).behaviour.needs_bundle(row.state)
    }
    quotas = quotas_by_tenant(needing)
    for tenant_id, tenant in needing.items():
        try:
            ensure_bundle(tenant, gw, quotas=quotas[tenant_id])
        except KubeError as exc:
            report.errors.append(f"bundle of {tenant.slug}: {exc.message}")


def _delete_orphans(
    seen: Seen, wanted: dict[str, set[tuple[str, str]]], gw: Gateway, report: Report
) -> None:
    """Delete each kind's managed objects that no live row wants and that are the kind's
    to delete (:meth:`Behaviour.orphan`)."""
    for kind in kinds().values():
        behaviour = kind.behaviour
        for key, obj in seen.objects.get(kind.object_kind, {}).items():
            if key in wanted[kind.object_kind] or obj["metadata"].get("deletionTimestamp"):
                continue
            if not behaviour.orphan(obj):
                continue
            try:
                behaviour.delete_object(gw, *key)
                report.orphans.append(f"{key[0]}/{key[1]}")
            except KubeError as exc:
                report.errors.append(f"orphan {kind.noun} {key}: {exc.message}")
