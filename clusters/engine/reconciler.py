"""The reconciler: one pass folds the cluster's truth into the rows and repairs drift.

A pass reads every kind from the informers' caches (one LIST and then a WATCH per kind,
kept by the worker process: :mod:`clusters.engine.informers`), or, where a kind's watch
is not open, with one LIST per kind, concurrently (RayClusters, RayJobs, pods, nodes,
namespaces and the FailedScheduling events, filtered by the API server — never a GET per
cluster), records the free GPU capacity per flavor (:mod:`clusters.queue.free_capacity`), then for
every row that is not deleted and changed since a fold of it that changed nothing (its
row or its objects: :mod:`clusters.engine.foldmemo`; the others are skipped, so that a
pass costs what changed, not the fleet):

* folds RayCluster status and pod state into the row: ``ready`` only when the head and
  every desired worker are running and ready; otherwise ``state_reason`` says in plain
  words what the pods wait for, from their conditions and FailedScheduling events;
* recreates objects that vanished (and the namespace bundle with them);
* finishes deletions once the RayCluster and its pods are gone;
* never calls an object missing from LISTs older than its row's last move (or while
  the row waits for its provision pass): such a row waits for the next pass
  (``_listed_after``), and when its cache has still not caught up with the move
  :data:`READ_THROUGH_AFTER` later (a quiet kind), that one object is read directly
  (``_read_through``);
* warns owners once when a cluster is about to expire, and deletes clusters whose TTL
  ran out (reason ``expired``);
* keeps each tenant's namespace bundle (ResourceQuota and all) in step with its quota;
* lets the queue backend fold its view in (in Kueue mode: Kueue's verdicts on queued
  requests, and running clusters Kueue evicted, which go back to the queue);
* folds each job's RayJob (KubeRay's job status) into its row and releases a finished
  job's GPUs once its pods are gone (:mod:`clusters.engine.jobs`);
* folds the cluster autoscaler's answers to the requests that asked it for nodes
  (:mod:`clusters.engine.scale_up`), and deletes the ProvisioningRequests nobody waits on;
* deletes managed RayClusters and RayJobs that no live row wants (orphans).
It returns what it did, so the task can run an admission pass when capacity freed.
"""

from __future__ import annotations

import gc
import logging
import os
from collections import defaultdict
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from clusters.domain.states import HOLDS_QUOTA, LIVE, WANTS_RAYCLUSTER, State
from clusters.engine import foldmemo, informers, jobs, provisioning, scale_up
from clusters.engine.deletion import DELETED_MESSAGE, RAYCLUSTER, delete_raycluster
from clusters.engine.readiness import is_ready, waiting_reason
from clusters.kube import labels
from clusters.kube.bundles import ensure_bundle, forget_bundle, quotas_by_tenant
from clusters.kube.gateway import Gateway, KubeError, get_gateway
from clusters.models import ClusterRequest
from clusters.queue import free_capacity
from clusters.queue.backends import queue_backend
from clusters.queue.interface import QueueBackend, QueueView
from clusters.rows import lifecycle
from clusters.rows.transitions import note, release_gpus_many, transition, transition_many
from tenants.models import Tenant

log = logging.getLogger(__name__)

# A row whose object is missing from a cache that is not known fresh past the row's move
# waits for the next pass; once the move is this old, the pass GETs that one object
# instead. A busy kind's cache catches up within a pass's wait (0.1 s); one still behind
# after this belongs to a quiet kind, which only the grace would make fresh (2 s), and
# the end of a burst of deletes waited for it and then for beat's pass, 4.5 s in all.
READ_THROUGH_AFTER = timedelta(seconds=0.5)
# At most this many direct reads per pass (the others wait for the next pass).
MAX_READ_THROUGH = 50


@dataclass
class _Batch:
    """Row writes a pass makes in bulk at its end, in a constant number of queries."""

    to_ready: list[ClusterRequest] = field(default_factory=list)
    # Deleting rows whose RayCluster and pods are gone, by deletion reason.
    to_delete: dict[str, list[ClusterRequest]] = field(default_factory=lambda: defaultdict(list))
    # Finished jobs whose pods are gone: their GPUs go back.
    to_release: list[ClusterRequest] = field(default_factory=list)
    # (state the row was read in, new state_reason) -> primary keys
    reasons: dict[tuple[str, str], list[int]] = field(default_factory=lambda: defaultdict(list))


@dataclass
class Report:
    """What one reconcile pass did (for logs, tests and the admission nudge)."""

    ready: list[int] = field(default_factory=list)
    recreated: list[int] = field(default_factory=list)
    deleted: list[int] = field(default_factory=list)
    expired: list[int] = field(default_factory=list)
    orphans: list[str] = field(default_factory=list)
    released: list[int] = field(default_factory=list)
    # Waiting requests whose nodes the cluster autoscaler provisioned: admissible now.
    provisioned: list[int] = field(default_factory=list)
    evicted: list[int] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    # Rows left to the next pass: they changed after this pass's LISTs began, and their
    # RayCluster (a job's RayJob) is not in them (see _listed_after).
    deferred: list[int] = field(default_factory=list)
    # Objects read directly because their cache had not caught up (see _read_through).
    read_through: int = 0
    batch: _Batch = field(default_factory=_Batch, repr=False)

    # The cluster reported more free GPUs or nodes than at the last observation.
    capacity_grew: bool = False
    # Rows folded, and rows skipped as unchanged since a fold that changed nothing
    # (clusters.engine.foldmemo).
    folded: int = 0
    skipped: int = 0

    @property
    def freed_capacity(self) -> bool:
        return bool(self.deleted or self.expired or self.released or self.provisioned)

    @property
    def placeable_grew(self) -> bool:
        """Whether a request waiting for capacity may fit now. Admission counts the GPUs
        of admitted and provisioning clusters against the observed free GPUs (their pods
        may not be bound yet): rows moved to ready stop counting, and the observation
        itself may show more free."""
        return bool(self.ready) or self.capacity_grew


# The session-level advisory lock that keeps reconcile passes one at a time.
_LOCK_KEY = 0x6761_6E68  # "ganh"


def reconcile_exclusive(gw: Gateway | None = None) -> Report | None:
    """:func:`reconcile_once` unless another pass is running (then ``None``).

    Two passes at once would be safe (every write is idempotent or conditional) but
    would double the load for nothing; the caller asks for a pass again instead.
    """
    if connection.vendor != "postgresql":
        return reconcile_once(gw)  # SQLite (make run): one solo worker, no concurrency
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [_LOCK_KEY])
        row = cursor.fetchone()
    if not (row and row[0]):
        return None
    try:
        return reconcile_once(gw)
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [_LOCK_KEY])


@contextmanager
def _without_cycle_collection() -> Iterator[None]:
    """Pause the cyclic garbage collector for the length of a pass.

    A pass holds the decoded LISTs — millions of small dicts and lists at thousands of
    clusters — and every full collection triggered meanwhile walks all of them: measured,
    that was most of the database half of a 5,000-cluster pass. Nothing a pass builds
    needs the cycle collector (plain JSON has no cycles; reference counting frees it);
    collection resumes when the pass ends.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def reconcile_once(gw: Gateway | None = None) -> Report:
    """One reconcile pass; see the module docstring."""
    with _without_cycle_collection():
        return _reconcile(gw)


def _reconcile(gw: Gateway | None) -> Report:
    gw = gw or get_gateway()
    backend = queue_backend()
    report = Report()
    seen = _observe(gw)  # before the rows: an object listed has its row read below
    report.capacity_grew = seen.capacity_grew
    now = timezone.now()
    live = foldmemo.live_rows()
    tenants = Tenant.objects.in_bulk({row.tenant_id for row in live})
    memo = foldmemo.MEMO if foldmemo.skips_allowed(backend.folds_incrementally) else None
    if memo is not None:
        memo.begin()
    plan = _plan(live, tenants, seen, backend, memo, now)
    report.skipped = len(live) - len(plan.stamps)
    for tenant in tenants.values():
        if tenant.namespace not in seen.namespaces:
            forget_bundle(tenant.pk)
            backend.forget_applied()
    rows = _rows_to_fold(plan.stamps, len(live), tenants)
    view = backend.observe(gw, rows)
    quiet, acted = _fold_rows(rows, plan.stamps, seen, gw, backend, view, report, now)
    _write_batch(report, now)
    try:
        report.provisioned = scale_up.fold_capacity(rows, gw)
    except KubeError as exc:
        report.errors.append(f"capacity requests: {exc.message}")
    _keep_bundles(live, tenants, gw, report)
    _delete_orphans(seen.rayclusters, plan.wanted, gw, report)
    _delete_orphan_jobs(seen.rayjobs, plan.wanted_jobs, gw, report)
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
    wanted: set[tuple[str, str]] = field(default_factory=set)
    wanted_jobs: set[tuple[str, str]] = field(default_factory=set)


def _plan(
    live: list[foldmemo.LiveRow],
    tenants: dict[int, Tenant],
    seen: _Seen,
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
        if live_row.is_job:
            plan.wanted_jobs.add(key)
        elif _wants_raycluster(live_row.state, backend):
            plan.wanted.add(key)
        if memo is None or foldmemo.always_folded(live_row, now):
            plan.stamps[live_row.pk] = None
            continue
        objects = (
            _job_objects_stamp(seen, key, live_row.pk)
            if live_row.is_job
            else _objects_stamp(seen, key)
        )
        stamp = (live_row.stamp, objects)
        if not memo.unchanged(live_row.pk, stamp):
            plan.stamps[live_row.pk] = stamp
    return plan


def _fold_rows(
    rows: list[ClusterRequest],
    stamps: dict[int, Any],
    seen: _Seen,
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
            if cluster.is_job:
                if jobs.fold_job(
                    cluster,
                    seen.rayjobs.get(key),
                    seen.pods_by_id.get(cluster.pk, []),
                    gw,
                    view,
                    release=report.batch.to_release,
                ):
                    report.released.append(cluster.pk)
                continue
            _reconcile_row(cluster, seen, key, gw, backend, view, report, now)
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
    stamps: dict[int, Any], live: int, tenants: dict[int, Tenant]
) -> list[ClusterRequest]:
    """The rows this pass folds, with what folding them reads. Their tenants are the
    ones the pass read already (a row whose tenant came after is left to the next pass)."""
    if not stamps:
        return []
    # prefetch, not select_related: a few flavors and owners shared by thousands of
    # rows are read once each instead of once per row.
    query = ClusterRequest.objects.unscoped().prefetch_related("flavor", "owner", "job")
    if len(stamps) == live:
        # All of them (the first pass, a full pass, SQLite, Kueue): no list of ids.
        rows = list(query.not_deleted())
    else:
        rows = list(query.filter(pk__in=list(stamps)).not_deleted())
    folded = [row for row in rows if row.tenant_id in tenants]
    for row in folded:
        row.tenant = tenants[row.tenant_id]
    return folded


def _read_through(rows: list[ClusterRequest], seen: _Seen, gw: Gateway, now: datetime) -> int:
    """GET the object of each row the pass would defer (``_listed_after``) whose move is
    :data:`READ_THROUGH_AFTER` old, at most :data:`MAX_READ_THROUGH`; returns how many.

    A GET answers from the API server as of now, after the row's move (the row was read
    after this pass began): what it finds is folded as a LIST's item would be, and what
    it does not find is known missing (``seen.confirmed_missing``). A failed GET leaves
    the row deferred. Pods come from the caches as before: those whose absence finishes
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
        api_version, kind = jobs.RAYJOB if row.is_job else RAYCLUSTER
        try:
            obj = gw.get(api_version, kind, row.name, row.namespace)
        except KubeError as exc:
            log.info("read %s %s directly: %s", kind, key, exc.message)
            continue
        read += 1
        if obj is None:
            seen.confirmed_missing.add((kind, key))
        else:
            (seen.rayjobs if row.is_job else seen.rayclusters)[key] = obj
    return read


def _listed_after(cluster: ClusterRequest, seen: _Seen, key: tuple[str, str]) -> bool:
    """Whether this pass's LISTs may tell the row that its RayCluster (a job's RayJob)
    is missing.

    The objects of a state are written after the row moves to it (a batch applies,
    then moves its rows to provisioning or starting; the provision pass writes a job's
    RayJob, or deletes a RayCluster, after the request's commit). A LIST that began
    before the row's last move, or while the row still waits for its provision pass
    (``provision_requested_at``), may predate those writes: acting on its absence
    would apply the object a second time, finish a deletion whose RayCluster was
    applied since, or call a running job's RayJob vanished. Such a row is left to the
    next pass, whose LISTs are newer (and it is not remembered as settled). A row whose
    object is listed is folded as usual."""
    listed = seen.rayjobs.get(key) if cluster.is_job else seen.rayclusters.get(key)
    if listed is not None:
        return True
    if (jobs.RAYJOB[1] if cluster.is_job else RAYCLUSTER[1], key) in seen.confirmed_missing:
        return True
    listed_at = seen.jobs_listed_at if cluster.is_job else seen.listed_at
    return cluster.provision_requested_at is None and cluster.progress_at < listed_at


def _objects_stamp(seen: _Seen, key: tuple[str, str]) -> tuple[Any, ...]:
    """What a cluster row's fold reads of the cluster, by resourceVersion: its RayCluster,
    its pods and their FailedScheduling events (Kubernetes gives an object a new
    resourceVersion on every write)."""
    rc = seen.rayclusters.get(key)
    pods = seen.pods.get(key, ())
    events = seen.events
    return (
        rc["metadata"]["resourceVersion"] if rc is not None else None,
        tuple(p["metadata"].get("resourceVersion") for p in pods),
        tuple(
            events[uid]["metadata"].get("resourceVersion")
            for p in pods
            if (uid := p["metadata"].get("uid", "")) in events
        ),
    )


def _job_objects_stamp(seen: _Seen, key: tuple[str, str], pk: int) -> tuple[Any, ...]:
    """What a job's fold reads of Kubernetes, by resourceVersion: its RayJob and every
    pod of the job (its Ray pods and its submitter)."""
    rj = seen.rayjobs.get(key)
    return (
        rj["metadata"]["resourceVersion"] if rj is not None else None,
        tuple(p["metadata"].get("resourceVersion") for p in seen.pods_by_id.get(pk, ())),
    )


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
    """Move the rows found ready or gone, give back finished jobs' GPUs and record the
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
    released = release_gpus_many(report.batch.to_release, message=jobs.RELEASED_MESSAGE)
    report.released.extend(c.pk for c in released)
    for (state, reason), pks in report.batch.reasons.items():
        ClusterRequest.objects.filter(pk__in=pks, state=state).update(state_reason=reason)


@dataclass
class _Seen:
    """What one pass read from the cluster, keyed by (namespace, RayCluster name)."""

    rayclusters: dict[tuple[str, str], dict[str, Any]]
    rayjobs: dict[tuple[str, str], dict[str, Any]]
    pods: dict[tuple[str, str], list[dict[str, Any]]]
    # Managed pods by the request id they are labelled with (a job's pods: its Ray
    # cluster's, named by KubeRay, and its submitter's).
    pods_by_id: dict[int, list[dict[str, Any]]]
    namespaces: set[str]
    events: dict[str, dict[str, Any]]
    # How fresh the RayClusters read are (when their LIST began, or what their cache is
    # known to hold): what they lack may have been written since.
    listed_at: datetime
    # The same for the RayJobs, which a job's row is folded from.
    jobs_listed_at: datetime
    capacity_grew: bool = False
    # (kind, key) of objects a direct read found missing after their row's last move.
    confirmed_missing: set[tuple[str, tuple[str, str]]] = field(default_factory=set)


def _observe(gw: Gateway) -> _Seen:
    """Every kind a pass reads: from the informers' caches where their watch is open
    (:mod:`clusters.engine.informers`), else one LIST per kind, issued concurrently;
    records the free GPU capacity per flavor.

    The LISTs run in parallel because the pass mostly waits: while the API server
    encodes one kind, this process decodes another.
    """
    started = timezone.now()
    lists = _lists()
    cache = informers.caches(lists)
    views = cache.read(gw) if cache is not None else {}
    missing = {what: spec for what, spec in lists.items() if what not in views}
    pool = _list_threads(len(lists))
    futures = {
        what: pool.submit(gw.list, api_version, kind, **selectors)
        for what, (api_version, kind, selectors) in missing.items()
    }
    results = {what: view.items for what, view in views.items()}
    results.update({what: future.result() for what, future in futures.items()})

    # What a row's fold may call missing (its RayCluster, a job's RayJob) is as fresh as
    # that kind's cache (a LIST holds what was written before it began), each by its
    # own: no RayJob changes while clusters are deleted, and a quiet kind's cache is
    # known fresh only up to the grace. The pods whose absence finishes a deletion were
    # written long before the row moved to deleting, so a cache has them.
    def fresh(kind: str) -> datetime:
        if kind not in views:
            return started
        return min(started, datetime.fromtimestamp(views[kind].fresh_at, tz=UTC))

    listed_at, jobs_listed_at = fresh("rayclusters"), fresh("rayjobs")
    all_pods = results["pods"]
    capacity_grew = free_capacity.record(free_capacity.free_by_product(results["nodes"], all_pods))
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
    return _Seen(
        rayclusters={
            (rc["metadata"]["namespace"], rc["metadata"]["name"]): rc
            for rc in results["rayclusters"]
        },
        rayjobs={
            (rj["metadata"]["namespace"], rj["metadata"]["name"]): rj for rj in results["rayjobs"]
        },
        pods=pods,
        pods_by_id=pods_by_id,
        namespaces={ns["metadata"]["name"] for ns in results["namespaces"]},
        events=events,
        listed_at=listed_at,
        jobs_listed_at=jobs_listed_at,
        capacity_grew=capacity_grew,
    )


_THREADS: tuple[int, ThreadPoolExecutor] | None = None


def _list_threads(size: int) -> ThreadPoolExecutor:
    """The threads passes list with, kept for the life of the process (made again in a
    forked child, which has none of its parent's threads). Threads made for each pass
    each opened their own connections to the shared cache (Django's caches are per
    thread), a few times a second during a burst."""
    global _THREADS
    if _THREADS is None or _THREADS[0] != os.getpid():
        _THREADS = (
            os.getpid(),
            ThreadPoolExecutor(max_workers=size, thread_name_prefix="reconcile-list"),
        )
    return _THREADS[1]


def _lists() -> dict[str, tuple[str, str, dict[str, Any]]]:
    """What a pass lists: apiVersion, kind and selectors, by name."""
    managed = {"label_selector": labels.managed_selector()}
    return {
        "rayclusters": ("ray.io/v1", "RayCluster", managed),
        "rayjobs": ("ray.io/v1", "RayJob", managed),
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
    }


def _wants_raycluster(state: str, backend: QueueBackend) -> bool:
    """Whether a row in ``state`` wants its RayCluster to exist (others' RayClusters are
    orphans)."""
    if state == State.QUEUED:
        return backend.provisions_queued
    if state == State.SUSPENDED:
        return not backend.suspend_deletes
    return state in WANTS_RAYCLUSTER


def _keep_bundles(
    live: list[foldmemo.LiveRow], tenants: dict[int, Tenant], gw: Gateway, report: Report
) -> None:
    """Keep every namespace bundle in step with its tenant's quota (a no-op unless the
    quota changed or the namespace vanished: ensure_bundle remembers what it applied).
    The quota rows of every tenant are read in one query, not one per tenant."""
    needing = {
        row.tenant_id: tenants[row.tenant_id]
        for row in live
        if row.tenant_id in tenants
        and (row.state in WANTS_RAYCLUSTER or (row.is_job and row.state in LIVE))
    }
    quotas = quotas_by_tenant(needing)
    for tenant_id, tenant in needing.items():
        try:
            ensure_bundle(tenant, gw, quotas=quotas[tenant_id])
        except KubeError as exc:
            report.errors.append(f"bundle of {tenant.slug}: {exc.message}")


def _delete_orphans(
    rayclusters: dict[tuple[str, str], dict[str, Any]],
    wanted: set[tuple[str, str]],
    gw: Gateway,
    report: Report,
) -> None:
    """Delete managed RayClusters that no live row wants (a job's RayCluster is its
    RayJob's: KubeRay made it and copies the job's labels onto it, and it goes with it)."""
    for key, rc in rayclusters.items():
        owners = rc["metadata"].get("ownerReferences") or []
        if any(ref.get("kind") == "RayJob" for ref in owners):
            continue
        if key not in wanted and not rc["metadata"].get("deletionTimestamp"):
            try:
                delete_raycluster(gw, *key)
                report.orphans.append(f"{key[0]}/{key[1]}")
            except KubeError as exc:
                report.errors.append(f"orphan {key}: {exc.message}")


def _delete_orphan_jobs(
    rayjobs: dict[tuple[str, str], dict[str, Any]],
    wanted: set[tuple[str, str]],
    gw: Gateway,
    report: Report,
) -> None:
    """Delete managed RayJobs that no row wants (their row is deleted, or never was)."""
    for key, rj in rayjobs.items():
        if key not in wanted and not rj["metadata"].get("deletionTimestamp"):
            try:
                jobs.delete_rayjob(gw, *key)
                report.orphans.append(f"{key[0]}/{key[1]}")
            except KubeError as exc:
                report.errors.append(f"orphan job {key}: {exc.message}")


def _reconcile_row(
    cluster: ClusterRequest,
    seen: _Seen,
    key: tuple[str, str],
    gw: Gateway,
    backend: QueueBackend,
    view: QueueView,
    report: Report,
    now: Any,
) -> None:
    """Fold one row's objects into it, or repair them; see the module docstring."""
    rc = seen.rayclusters.get(key)
    state = cluster.state
    if state == State.QUEUED and backend.provisions_queued:
        # The backend queues the RayCluster itself (held suspended until admitted).
        if rc is None:
            provisioning.apply_cluster(cluster, gw)
        else:
            view.fold_waiting(cluster)
        return
    if state == State.SUSPENDED and backend.suspend_deletes:
        if rc is not None and not rc["metadata"].get("deletionTimestamp"):
            delete_raycluster(gw, cluster.namespace, cluster.name)
        return
    if state in HOLDS_QUOTA and rc is not None and view.fold_eviction(cluster):
        report.evicted.append(cluster.pk)
        return
    if state in LIVE and cluster.expires_at and cluster.expires_at <= now:
        lifecycle.request_deletion(cluster, reason="expired")
        report.expired.append(cluster.pk)
        return
    pods = seen.pods.get(key, [])
    if state == State.DELETING:
        if rc is not None and not rc["metadata"].get("deletionTimestamp"):
            delete_raycluster(gw, cluster.namespace, cluster.name)
        elif rc is None and not pods:
            # Moved with the others at the end of the pass (finish_deletion in bulk).
            report.batch.to_delete[cluster.deletion_reason or "deleted"].append(cluster)
        return
    if state in (State.PROVISIONING, State.READY, State.SUSPENDED):
        _warn_of_expiry(cluster, now)
        _fold_running(cluster, rc, pods, seen.events, gw, report, now)


def _fold_running(
    cluster: ClusterRequest,
    rc: dict[str, Any] | None,
    pods: list[dict[str, Any]],
    events: dict[str, dict[str, Any]],
    gw: Gateway,
    report: Report,
    now: Any,
) -> None:
    """A provisioning, ready or suspended row: recreate what vanished, fold readiness."""
    state = cluster.state
    if rc is None:
        provisioning.apply_cluster(cluster, gw)
        report.recreated.append(cluster.pk)
        if state == State.READY:
            transition(
                cluster,
                State.PROVISIONING,
                reason="recreated",
                message="its RayCluster vanished and was recreated",
                ready_at=None,
            )
        return
    if state == State.SUSPENDED:
        if not (rc.get("spec") or {}).get("suspend"):
            provisioning.apply_cluster(cluster, gw)
        return
    ready = is_ready(cluster, rc, pods)
    if ready and state == State.PROVISIONING:
        report.batch.to_ready.append(cluster)
    elif not ready:
        reason = waiting_reason(cluster, pods, events)
        if state == State.READY:
            transition(
                cluster, State.PROVISIONING, reason="degraded", message=reason, ready_at=None
            )
        elif reason != cluster.state_reason:
            report.batch.reasons[(state, reason)].append(cluster.pk)


def _warn_of_expiry(cluster: ClusterRequest, now: Any) -> None:
    """Tell the owner, once, that the cluster expires soon and can be extended (USERS 1)."""
    warning = timedelta(minutes=settings.EXPIRY_WARNING_MINUTES)
    if not cluster.expires_at or cluster.expiry_warned_at or cluster.expires_at - now > warning:
        return
    with transaction.atomic():  # the mark and its event are seen together
        claimed = ClusterRequest.objects.filter(
            pk=cluster.pk, expiry_warned_at__isnull=True
        ).update(expiry_warned_at=now)
        if claimed:
            minutes = max(int((cluster.expires_at - now).total_seconds() // 60), 0)
            note(
                cluster,
                reason="expiry_warning",
                message=f"expires at {cluster.expires_at:%H:%M} UTC (in {minutes} min) and its "
                "GPUs will be released; extend it to keep it",
            )
