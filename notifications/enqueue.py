"""Work for the notification tasks, sent by name (nothing below the tasks imports them)."""

from __future__ import annotations

from celery import current_app
from django.db import transaction

from clusters.rows.enqueue import pass_started, register_pass, request_pass

DISPATCH = "notifications.tasks.dispatch"
DELIVER = "notifications.tasks.deliver"
SWEEP = "notifications.tasks.sweep"
# The PendingPass row of the dispatch pass (clusters.rows.enqueue coalesces it).
DISPATCH_PENDING = "notify-dispatch"
# A dispatch that found another running asks again this much later.
BUSY_RETRY_SECONDS = 0.5


def coalesce_dispatch() -> None:
    """Register the dispatch pass with the engine's coalescing (the app's ``ready()``)."""
    register_pass(DISPATCH, DISPATCH_PENDING)


def dispatch_started() -> None:
    """Called by the dispatch task before it reads: later events ask for the next pass."""
    pass_started(DISPATCH)


def dispatch_again() -> None:
    """Ask for another dispatch pass a little later (another was running)."""
    request_pass(DISPATCH, countdown=BUSY_RETRY_SECONDS)


def dispatch_more() -> None:
    """Ask for another dispatch pass at once (this one left events for the next)."""
    request_pass(DISPATCH)


def send(name: str, *args: object, countdown: float = 0) -> None:
    """Send task ``name`` now (inline when Celery runs tasks eagerly)."""
    if current_app.conf.task_always_eager:
        current_app.tasks[name].apply(args=args)
        return
    current_app.send_task(name, args=args, countdown=countdown or None)


def deliver_after_commit(delivery_ids: list[int]) -> None:
    """Send each delivery once the current transaction commits."""
    for pk in delivery_ids:
        transaction.on_commit(lambda pk=pk: send(DELIVER, pk))  # type: ignore[misc]


def dispatch_after_commit() -> None:
    """Ask for a dispatch pass (coalesced) once the current transaction commits."""
    # robust: a broker that is down must not fail the request that wrote the event.
    transaction.on_commit(lambda: request_pass(DISPATCH), robust=True)
