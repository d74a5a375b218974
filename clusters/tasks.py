"""Celery tasks: thin wrappers that take a primary key, re-read the row and converge.

The row is the outbox: every task is safe to run twice or in parallel, a lost message
is re-sent by :func:`sweep`, and a worker killed mid-task has its message redelivered
(``acks_late`` + ``task_reject_on_worker_lost``). Transient Kubernetes errors are retried
with exponential backoff and jitter (at least the server's ``Retry-After``); attempts
are counted in the row and the request fails with ``last_error`` after the limit.
Permanent errors fail the request at once with a readable ``last_error``.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from celery import current_app, shared_task
from django.conf import settings
from django.db.models import F
from django.utils import timezone

from clusters.domain.states import State
from clusters.domain.workload_kinds import row_relations
from clusters.engine import idle, member_drain, member_passes, provisioning, scale_up
from clusters.engine.pass_state import Report
from clusters.engine.reconciler import reconcile_exclusive
from clusters.kube.bundles import BatchBundles
from clusters.kube.connection import gateway_of, member_of, on_unreachable, placed_gateways
from clusters.kube.gateway import PermanentKubeError, TransientKubeError
from clusters.members.health import fleet_probe
from clusters.models import ClusterRequest, KubeCluster
from clusters.queue.backends import queue_backend
from clusters.queue.free_capacity import anyone_waiting as waiting_for_capacity
from clusters.rows import enqueue
from clusters.rows.transitions import transition
from controlplane import metrics

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 8
BACKOFF_BASE_SECONDS = 1.0
BACKOFF_CAP_SECONDS = 60.0
# A pass that found another one running asks again this much later.
BUSY_RETRY_SECONDS = 0.5
# Rows in these states are waiting on a provisioning step; the sweeper re-nudges them.
_STEP_STATES = (State.ADMITTED, State.DELETING)


def backoff_seconds(attempt: int, retry_after: float | None = None) -> float:
    """Exponential backoff with full jitter, never shorter than ``retry_after``."""
    ceiling = min(BACKOFF_CAP_SECONDS, BACKOFF_BASE_SECONDS * (2 ** max(attempt - 1, 0)))
    delay = random.uniform(ceiling / 2, ceiling)
    return max(delay, retry_after or 0.0)


def _fail(cluster: ClusterRequest, error: str) -> None:
    if cluster.state in (State.FAILED, State.DELETED):
        return
    transition(cluster, State.FAILED, reason="error", message=error[:500], last_error=error)


@shared_task(name=enqueue.PROVISION, bind=True, acks_late=True, max_retries=None)
def provision_cluster(self: Any, cluster_id: int) -> None:
    """Converge one cluster request's Kubernetes objects with its row."""
    cluster = (
        ClusterRequest.objects.unscoped()
        .select_related("tenant", "flavor", "owner", "kube_cluster", *row_relations())
        .filter(pk=cluster_id)
        .first()
    )
    if cluster is None or not provisioning.wants_provisioning(cluster):
        return
    try:
        provisioning.converge(cluster)
    except TransientKubeError as exc:
        metrics.API_ERRORS.labels("transient").inc()
        if _member_unreachable(cluster):
            # Its member is down: the row keeps its state (stale) and waits for it, as
            # long as it takes, instead of failing after MAX_ATTEMPTS; the sweeper sends
            # it again every SWEEP_STALE_SECONDS, and the member's passes resume when it
            # answers again.
            ClusterRequest.objects.filter(pk=cluster.pk).update(
                last_error=exc.message[:2000], progress_at=timezone.now()
            )
            return
        attempts = cluster.attempts + 1
        if attempts >= MAX_ATTEMPTS:
            _fail(cluster, f"gave up after {attempts} attempts: {exc.message}")
            return
        countdown = backoff_seconds(attempts, exc.retry_after)
        now = timezone.now()
        # progress_at moves to the retry time, so the sweeper does not re-send this row
        # before the retry is due (which would ignore the server's Retry-After). Only one
        # of two tasks of the row refused at once schedules the retry: the other finds the
        # retry already due later, and leaves the row to it (one attempt, one back-off).
        claimed = ClusterRequest.objects.filter(pk=cluster.pk, progress_at__lte=now).update(
            attempts=F("attempts") + 1,
            last_error=exc.message[:2000],
            progress_at=now + timedelta(seconds=countdown),
        )
        if not claimed:
            return
        raise self.retry(countdown=countdown, exc=exc) from exc
    except PermanentKubeError as exc:
        metrics.API_ERRORS.labels("permanent").inc()
        log.warning("cluster %s failed: %s", cluster, exc.message)
        _fail(cluster, exc.message)
        return
    if cluster.state in (State.DELETED, State.PROVISIONING):
        _nudge_reconcile()


def _member_unreachable(cluster: ClusterRequest) -> bool:
    """Whether the member the row is placed on is marked unreachable."""
    member = member_of(cluster)
    return member is not None and member.reachable is False


def _nudge_reconcile(*, at_once: bool = False) -> None:
    """Let the reconciler see freed or applied capacity soon; coalesced and slightly
    delayed so a burst shares one pass (``at_once``: none would)."""
    delay = 0.0 if at_once else settings.RECONCILE_NUDGE_DELAY_SECONDS
    enqueue.request_pass(enqueue.RECONCILE, countdown=delay)


def _nudge_after_batch() -> None:
    """Ask for the pass that sees a batch ready: delayed while a burst goes on (an
    admission pass is asked for), not at all while other batches' rows are admitted
    (the last one asks; beat runs anyway), else at once."""
    if enqueue.is_requested(enqueue.ADMISSION_PASS):
        _nudge_reconcile()
    elif not provisioning.any_admitted():
        _nudge_reconcile(at_once=True)


@shared_task(name=enqueue.PROVISION_MANY, acks_late=True)
def provision_clusters(cluster_ids: list[int]) -> None:
    """Converge a batch of admitted rows (a row's transient error: its own task)."""
    _converge_batch(cluster_ids)


# Rows one provision pass takes; a pass that took this many asks for the next at once,
# which the other worker process may run beside it.
PROVISION_PASS_BATCH = 50


@shared_task(name=enqueue.PROVISION_REQUESTED, acks_late=True)
def provision_requested() -> int:
    """The provision pass: converge the rows marked for a provisioning step
    (:func:`clusters.rows.enqueue.provision_marked`), in a batch as :func:`provision_clusters`
    does; returns how many it took."""
    enqueue.pass_started(enqueue.PROVISION_REQUESTED)
    taken = provisioning.take_requested(PROVISION_PASS_BATCH)
    if len(taken) == PROVISION_PASS_BATCH:
        # More are marked: the next batch now, not after the pass's interval.
        enqueue.request_pass(enqueue.PROVISION_REQUESTED, paced=False)
    if taken:
        _converge_batch(taken)
    return len(taken)


def _converge_batch(cluster_ids: list[int]) -> None:
    """Converge a batch of rows read in one query, each tenant's bundle ensured once for
    the batch; the admitted rows move on together at the end. A row's transient error
    goes to its own task and a refusal fails that row: the batch never retries as a
    whole, so one bad row does not hold up the others."""
    rows = list(
        ClusterRequest.objects.unscoped()
        .select_related("tenant", "flavor", "owner", *row_relations())
        .filter(pk__in=cluster_ids)
        .order_by("pk")
    )
    gateways = placed_gateways(rows)  # each row's member's
    # Rows whose member is down wait for it (stale), without holding up the batch on
    # its timeouts; the sweeper sends them again.
    down = on_unreachable(rows)
    if down:
        ClusterRequest.objects.filter(pk__in=down).update(progress_at=timezone.now())
    bundles = BatchBundles(row.tenant_id for row in rows)
    admitted: list[ClusterRequest] = []  # moved on together, below
    moved = deleting = False
    for cluster in rows:
        if cluster.pk in down or not provisioning.wants_provisioning(cluster):
            continue
        try:
            # A deletion is finished by the reconciler, in bulk, from the LISTs it makes
            # anyway: asking after each RayCluster and its pods here was two more
            # requests per row, and a transition per row.
            provisioning.converge(
                cluster,
                gateways[cluster.pk],
                bundles=bundles,
                admitted=admitted,
                finish_deletion=False,
            )
            deleting = deleting or cluster.state == State.DELETING
        except TransientKubeError as exc:
            metrics.API_ERRORS.labels("transient").inc()
            log.info("cluster %s left the batch for its own task: %s", cluster, exc.message)
            # Not before a 429's Retry-After (the Kubernetes API suite caught the row's own
            # task re-sending the refused apply 0.05 s later).
            enqueue.send(enqueue.PROVISION, cluster.pk, countdown=exc.retry_after or 0)
            continue
        except PermanentKubeError as exc:
            # As the single-row task does: a refusal is not retried.
            metrics.API_ERRORS.labels("permanent").inc()
            log.warning("cluster %s failed: %s", cluster, exc.message)
            _fail(cluster, exc.message)
            continue
        moved = moved or cluster.state in (State.DELETED, State.PROVISIONING)
    started = provisioning.mark_started(admitted)
    if any(row.state == State.PROVISIONING for row in started):
        moved = True
    if moved:
        _nudge_after_batch()
    elif deleting:
        _nudge_reconcile()  # coalesced, as a single row's deletion asks for it


@shared_task(name=enqueue.ADMISSION_PASS, acks_late=True)
def admission_pass() -> list[int]:
    """Run one admission pass (a no-op under Kueue). If another holds the lock, ask
    again rather than wait: it may have read its snapshot before this nudge's change."""
    enqueue.pass_started(enqueue.ADMISSION_PASS)
    result = queue_backend().admission_pass()
    if result.busy:
        enqueue.request_pass(enqueue.ADMISSION_PASS, countdown=BUSY_RETRY_SECONDS)
    return result.admitted


@shared_task(name=enqueue.RECONCILE, acks_late=True)
def reconcile() -> dict[str, int]:
    """One reconcile pass over every member of the fleet, each member's on its own
    (:mod:`clusters.engine.member_passes`); asks for an admission pass when one freed
    capacity. Returns the counts of the passes that ended in time, summed."""
    enqueue.pass_started(enqueue.RECONCILE)
    if not KubeCluster.objects.exists():
        return _settings_cluster_pass()  # no member registered: settings' cluster only
    # Drains move rows off their members before the passes, which then delete what the
    # moved rows left there; what moved off members is followed until placed again.
    member_drain.fleet_step()
    outcome = member_passes.reconcile_fleet(
        lambda _member, report: _after_pass(report),
        lambda: enqueue.request_pass(enqueue.RECONCILE),
    )
    counts = _sum(_counts(report) for report in outcome.reports.values())
    if outcome.failed:
        counts["errors"] = counts.get("errors", 0) + len(outcome.failed)
        for name, error in outcome.failed.items():
            log.warning("reconcile of member %s skipped: %s", name, error)
    if outcome.busy and not outcome.reports and not outcome.failed:
        # Every member's pass was running (another worker's, or a slow one still
        # going): ask again, as a pass that found the lock taken always did.
        enqueue.request_pass(enqueue.RECONCILE, countdown=BUSY_RETRY_SECONDS)
        return {"busy": 1}
    return counts


def _settings_cluster_pass() -> dict[str, int]:
    try:
        report = reconcile_exclusive()
    except TransientKubeError as exc:
        log.warning("reconcile skipped: %s", exc.message)
        return {"errors": 1}
    if report is None:
        enqueue.request_pass(enqueue.RECONCILE, countdown=BUSY_RETRY_SECONDS)
        return {"busy": 1}
    _after_pass(report)
    return _counts(report)


def _after_pass(report: Report) -> None:
    """What a member's pass asks for next: another pass for the rows it deferred, an
    admission pass when it freed capacity."""
    if report.deferred and not current_app.conf.task_always_eager:
        # Rows whose objects the caches could not vouch for yet: the next pass sees them
        # (and reads them directly once their move is READ_THROUGH_AFTER old). Without
        # it, the last rows of a burst waited for beat's pass, up to 5 s.
        enqueue.request_pass(enqueue.RECONCILE, countdown=settings.RECONCILE_NUDGE_DELAY_SECONDS)
    if report.freed_capacity or (report.placeable_grew and waiting_for_capacity()):
        # Without this, a request refused for capacity (while the GPUs it needs were
        # counted against it as not yet placed) waited for the next create or for
        # beat's backstop pass, 15 s later, although it fitted once the pass moved the
        # clusters ahead of it to ready.
        enqueue.request_pass(enqueue.ADMISSION_PASS)


def _counts(report: Report) -> dict[str, int]:
    return {
        "ready": len(report.ready),
        "recreated": len(report.recreated),
        "deleted": len(report.deleted),
        "expired": len(report.expired),
        "orphans": len(report.orphans),
        "evicted": len(report.evicted),
        "errors": len(report.errors),
        "deferred": len(report.deferred),
        "read_through": report.read_through,
        # How much of the fleet the pass had to look at (the rest had not changed).
        "folded": report.folded,
        "skipped": report.skipped,
    }


def _sum(counts: Iterable[dict[str, int]]) -> dict[str, int]:
    total: dict[str, int] = {}
    for one in counts:
        for key, value in one.items():
            total[key] = total.get(key, 0) + value
    return total


@shared_task(name="clusters.tasks.check_activity", acks_late=True)
def check_activity() -> dict[str, int]:
    """One idle-reclaim pass (:func:`clusters.engine.idle.check_activity`): read every
    ready cluster's activity from Ray, warn the idle, suspend the idle and warned; run the
    kinds' own idle policies (a service scaled to zero)."""
    report = idle.check_activity()
    if report.suspended or report.reclaimed:
        enqueue.request_pass(enqueue.ADMISSION_PASS)
    return {
        "checked": report.checked,
        "unreachable": report.unreachable,
        "warned": len(report.warned),
        "suspended": len(report.suspended),
        "reclaimed": len(report.reclaimed),
    }


@shared_task(name=enqueue.REQUEST_CAPACITY, bind=True, acks_late=True, max_retries=8)
def request_capacity(self: Any, cluster_id: int) -> None:
    """Write the ProvisioningRequest a waiting request asks the cluster autoscaler for
    its nodes with (:mod:`clusters.engine.scale_up`). A lost or failed message is not
    lost work: every reconcile pass writes it again while it is missing."""
    cluster = (
        ClusterRequest.objects.unscoped()
        .select_related("tenant", "flavor", "owner", "kube_cluster", *row_relations())
        .filter(pk=cluster_id)
        .first()
    )
    if cluster is None:
        return
    try:
        scale_up.request_capacity(cluster, gateway_of(cluster))
    except TransientKubeError as exc:
        raise self.retry(
            countdown=backoff_seconds(self.request.retries + 1, exc.retry_after), exc=exc
        ) from exc
    except PermanentKubeError as exc:
        log.warning("capacity request of %s refused: %s", cluster, exc.message)


@shared_task(name="clusters.tasks.sweep", acks_late=True)
def sweep() -> int:
    """Re-nudge rows whose provisioning step made no progress and passes whose message
    was lost (the row is the outbox).

    A row re-nudged has its ``progress_at`` renewed, as a pass's claim is
    (:func:`enqueue.resend_stale`): it is re-sent at most once per
    ``SWEEP_STALE_SECONDS``. Re-sending at every sweep while the first re-send still
    waited in the queue flooded it: under the Kubernetes API suite's faults, 35 deleting
    rows got a message each every second, faster than the worker ran them, and the
    queue grew past 6,000 messages, the provision pass that would have finished the
    deletions behind them."""
    now = timezone.now()
    cutoff = now - timedelta(seconds=settings.SWEEP_STALE_SECONDS)
    rows = ClusterRequest.objects.unscoped().filter(state__in=_STEP_STATES, progress_at__lt=cutoff)
    stale = list(rows.values_list("pk", flat=True))
    rows.filter(pk__in=stale).update(progress_at=now)
    for pk in stale:
        provision_cluster.delay(pk)
    enqueue.resend_stale(cutoff)
    if ClusterRequest.objects.unscoped().filter(state=State.QUEUED).exists():
        enqueue.request_pass(enqueue.ADMISSION_PASS)
    return len(stale)


@shared_task(name="clusters.tasks.probe_kube_clusters", acks_late=True)
def probe_kube_clusters() -> dict[str, bool]:
    """Record each fleet member's health (reachable, latency, version, operators);
    safe to run twice, as it only writes what it sees."""
    return fleet_probe()
