"""Work for the notification tasks, sent by name (nothing below the tasks imports them)."""

from __future__ import annotations

from celery import current_app
from django.db import transaction

DISPATCH = "notifications.tasks.dispatch"
DELIVER = "notifications.tasks.deliver"
SWEEP = "notifications.tasks.sweep"


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
    """Ask for a dispatch pass once the current transaction commits."""
    # robust: a broker that is down must not fail the request that wrote the event.
    transaction.on_commit(lambda: send(DISPATCH), robust=True)
