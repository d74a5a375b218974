"""Work for the Celery tasks, sent by task name once the current transaction commits.

Nothing below :mod:`clusters.tasks` may import it (``.importlinter``), so services, the
pass and the engine ask for work here. A message carries only a primary key: the row is
the desired state, and a lost message only delays work (the sweeper re-sends it).
Passes are *coalesced*: at most one message per pass is pending
(:class:`clusters.models.PendingPass`) and a pass sees everything committed before it
started, so a burst costs a handful of passes; one asked for soon after the last started
waits out its interval, so a steady stream of nudges is taken in batches.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from celery import current_app
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from clusters.models import PendingPass

logger = logging.getLogger(__name__)

PROVISION = "clusters.tasks.provision_cluster"
PROVISION_MANY = "clusters.tasks.provision_clusters"
PROVISION_REQUESTED = "clusters.tasks.provision_requested"
ADMISSION_PASS = "clusters.tasks.admission_pass"
RECONCILE = "clusters.tasks.reconcile"
REQUEST_CAPACITY = "clusters.tasks.request_capacity"

# The PendingPass row of each coalesced pass (other apps add theirs: register_pass).
PASSES = {ADMISSION_PASS: "admission", RECONCILE: "reconcile", PROVISION_REQUESTED: "provision"}


def register_pass(task: str, pending: str) -> None:
    """Coalesce another app's pass ``task`` (PendingPass row ``pending``) as ours are."""
    PASSES[task] = pending


def send(name: str, *args: object, countdown: float = 0) -> None:
    """Send task ``name`` now (eagerly when Celery is configured to run tasks inline),
    to start no sooner than ``countdown`` seconds from now."""
    if current_app.conf.task_always_eager:
        current_app.tasks[name].apply(args=args)
        return
    try:
        current_app.send_task(name, args=args, countdown=countdown or None)
    except _publish_errors() as exc:
        # The broker is down or restarting (Celery already retried the publish). The
        # caller's transaction has committed: its rows are the outbox, and the sweeper
        # re-sends what made no progress (stale provisioning steps, claimed passes), so
        # the work is delayed, not lost. Raising here would turn a request that was
        # saved into an error the client would retry, and so request twice.
        logger.warning("could not send %s%r, the sweeper will: %s", name, args, exc)


def _publish_errors() -> tuple[type[BaseException], ...]:
    """What a publish raises when the broker cannot be reached: Kombu's wrapper, and
    the transport's own connection errors (redis-py's are not ``OSError``)."""
    from kombu.exceptions import OperationalError

    with current_app.connection_for_write() as conn:
        transport = tuple(conn.connection_errors)
    return (OperationalError, OSError, *transport)


def after_commit(name: str, *args: object) -> None:
    """Send task ``name`` once the current transaction commits (at once outside one)."""
    transaction.on_commit(lambda: send(name, *args))


def provision(cluster_id: int) -> None:
    """Converge one cluster's Kubernetes objects with its row, after commit."""
    after_commit(PROVISION, cluster_id)


def provision_marked() -> None:
    """After commit, ask for the provision pass over rows marked ``provision_requested_at``."""
    # One coalesced pass per burst: a thousand deletes cost a handful of messages, and a
    # pass that dies leaves its rows to the reconciler and the sweeper.
    transaction.on_commit(lambda: request_pass(PROVISION_REQUESTED))


def provision_many(cluster_ids: list[int], *, batch: int = 25) -> None:
    """Converge many rows after commit, ``batch`` per message (small, so every worker
    gets a share; a row a batch cannot finish goes to :data:`PROVISION`)."""
    for start in range(0, len(cluster_ids), batch):
        after_commit(PROVISION_MANY, cluster_ids[start : start + batch])


def admission_pass() -> None:
    """Ask for an admission pass after commit (coalesced; a no-op task under Kueue)."""
    transaction.on_commit(lambda: request_pass(ADMISSION_PASS))


def reconcile() -> None:
    """Ask for a reconcile pass after commit (coalesced)."""
    transaction.on_commit(lambda: request_pass(RECONCILE))


def request_pass(name: str, *, countdown: float = 0, paced: bool = True) -> bool:
    """Send the pass ``name`` unless one is pending; returns whether it sent.
    ``countdown`` and the pass's interval (:func:`_pace`, unless not ``paced``) let the
    next moments' nudges join it. The claim is a short statement after the caller's
    commit (no lock held across a request); if the send is lost the claim stays, and
    :func:`resend_stale` sends it later."""
    if current_app.conf.task_always_eager:
        send(name)
        return True
    claimed, last_started = _claim(PASSES[name])
    if claimed:
        send(name, countdown=max(countdown, _pace(name, last_started) if paced else 0.0))
        return True
    return False


def _interval(name: str) -> float:
    """The least time between the starts of two passes ``name`` (settings; none for
    another app's passes)."""
    if name == ADMISSION_PASS:
        return float(settings.ADMISSION_PASS_INTERVAL_SECONDS)
    if name == RECONCILE:
        return float(settings.RECONCILE_PASS_INTERVAL_SECONDS)
    if name == PROVISION_REQUESTED:
        return float(settings.PROVISION_PASS_INTERVAL_SECONDS)
    return 0.0


def _pace(name: str, last_started: datetime | None) -> float:
    """Seconds until the pass ``name`` may start again: what is left of its interval
    since ``last_started`` (0 on a quiet system, where the last pass is long past)."""
    if last_started is None:
        return 0.0
    left = _interval(name) - (timezone.now() - last_started).total_seconds()
    return max(left, 0.0)


def _claim(pending: str) -> tuple[bool, datetime | None]:
    """Mark the pass ``pending`` as requested unless it already is (a conditional
    upsert); returns whether this caller moved it from unrequested (or created its row;
    a test database flushed between tests loses the rows the migration made), and, for
    the caller that claimed it, when the last pass started."""
    table = PendingPass._meta.db_table
    with connection.cursor() as cursor:
        # Already claimed: the pass has not yet cleared its claim (pass_started), so it
        # reads the rows after this caller's commit. A plain read, no row lock: in a
        # burst most nudges end here, and the upsert below locks the row even when it
        # changes nothing, which makes the caller's statement a write transaction
        # that waits for its commit to be flushed.
        cursor.execute(f"SELECT requested_at, started_at FROM {table} WHERE name = %s", [pending])
        found = cursor.fetchone()
        if found is not None and found[0] is not None:
            return False, None
        cursor.execute(
            f"INSERT INTO {table} (name, requested_at) VALUES (%s, %s) "
            f"ON CONFLICT (name) DO UPDATE SET requested_at = EXCLUDED.requested_at "
            f"WHERE {table}.requested_at IS NULL RETURNING started_at",
            [pending, timezone.now()],
        )
        claimed = cursor.fetchone()
        return claimed is not None, _aware(claimed[0]) if claimed else None


def _aware(value: datetime | str | None) -> datetime | None:
    """A timestamp read in plain SQL as the ORM would give it: SQLite (``make run``)
    returns text, or a naive datetime, where PostgreSQL returns an aware one."""
    if value is None:
        return None
    if isinstance(value, str):
        value = parse_datetime(value)
        if value is None:
            return None
    if timezone.is_naive(value):
        value = timezone.make_aware(value, UTC)
    return value


def is_requested(name: str) -> bool:
    """Whether the pass ``name`` is asked for and has not started yet."""
    return PendingPass.objects.filter(name=PASSES[name], requested_at__isnull=False).exists()


def pass_started(name: str) -> None:
    """Called by the pass ``name`` before it reads anything: nudges from now on ask for
    the next pass (this one may not see what they changed), paced from now."""
    PendingPass.objects.filter(name=PASSES[name]).update(
        requested_at=None, started_at=timezone.now()
    )


def resend_stale(older_than: datetime) -> list[str]:
    """Re-send every pass claimed before ``older_than`` whose message has not started it
    (a lost message, or a process that died between claim and send).

    The claim is renewed, so a message that is merely late behind a backlog is re-sent
    at most once per stale interval.
    """
    by_pending = {pending: task for task, pending in PASSES.items()}
    resent = []
    for pending in PendingPass.objects.filter(requested_at__lt=older_than).values_list(
        "name", flat=True
    ):
        renewed = PendingPass.objects.filter(name=pending, requested_at__lt=older_than).update(
            requested_at=timezone.now()
        )
        if renewed and pending in by_pending:
            send(by_pending[pending])
            resent.append(pending)
    return resent
