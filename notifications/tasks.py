"""Celery tasks of notifications: the dispatcher, one delivery, and the sweeper.

``deliver`` takes a delivery's primary key, claims the row with a lease (a conditional
UPDATE), sends once with a timeout and records the outcome; it is safe to run twice.
A transient failure is retried with exponential backoff and full jitter (at least the
receiver's ``Retry-After``) up to ``NOTIFY_MAX_ATTEMPTS``; a permanent one gives up at
once. A worker killed mid-send leaves the row open under a lease that runs out; the
sweeper then sends it again, so a receiver may see one delivery id twice (at least
once) and de-duplicates on it.
"""

from __future__ import annotations

import logging
import random
from typing import Any

from celery import shared_task
from django.conf import settings

from controlplane import metrics
from notifications import cost_notices, cost_reports, enqueue, outbox, services
from notifications.models import Channel, Delivery
from notifications.sending import Notice, SendError, post_webhook, send_email

log = logging.getLogger(__name__)


def backoff_seconds(attempt: int, retry_after: float | None = None) -> float:
    """Exponential backoff with full jitter, never shorter than ``retry_after``."""
    ceiling = min(
        settings.NOTIFY_BACKOFF_CAP_SECONDS,
        settings.NOTIFY_BACKOFF_BASE_SECONDS * (2 ** max(attempt - 1, 0)),
    )
    return max(random.uniform(ceiling / 2, ceiling), retry_after or 0.0)


@shared_task(name=enqueue.DISPATCH, acks_late=True)
def dispatch() -> dict[str, int]:
    """Turn new ClusterEvents into deliveries and send them (a few batches a run).

    Coalesced (:mod:`clusters.rows.enqueue`): events committed from now on ask for the next
    pass. If another pass holds the cursor, it may have read before the event that
    asked for this one, so this one asks again a little later."""
    enqueue.dispatch_started()
    created = 0
    report = outbox.PassReport()
    for _ in range(10):
        report = outbox.dispatch_pass()
        for pk in report.created:
            enqueue.send(enqueue.DELIVER, pk)
        created += len(report.created)
        if report.busy or report.events < outbox.BATCH:
            break
    if report.busy:
        enqueue.dispatch_again()
    elif report.events >= outbox.BATCH:
        enqueue.dispatch_more()  # a backlog larger than this run's batches
    return {"created": created, "cursor": report.cursor, "busy": int(report.busy)}


def _send(delivery: Delivery) -> None:
    """Send one claimed delivery through its channel; raises :class:`SendError`."""
    notice = Notice(delivery_id=str(delivery.delivery_id), payload=delivery.payload)
    if delivery.channel == Channel.EMAIL:
        user = delivery.user
        if user is None or not user.email:
            raise SendError("the user has no email address any more", permanent=True)
        send_email(to=user.email, notice=notice)
        return
    if delivery.target_key.startswith("webhook:"):
        hook = delivery.webhook
        if hook is None or not hook.active:
            raise SendError("the webhook was deleted or deactivated", permanent=True)
        post_webhook(url=hook.url, secret=hook.secret, notice=notice)
        return
    profile = getattr(delivery.user, "notification_profile", None)
    if profile is None or not profile.webhook_url:
        raise SendError("the user removed their webhook", permanent=True)
    post_webhook(url=profile.webhook_url, secret=profile.webhook_secret, notice=notice)


def _count(delivery: Delivery, outcome: str) -> None:
    metrics.DELIVERIES.labels(delivery.kind, delivery.channel, outcome).inc()


@shared_task(name=enqueue.DELIVER, bind=True, acks_late=True, max_retries=None)
def deliver(self: Any, delivery_pk: int) -> str:
    """Send one delivery (see the module docstring); returns what became of it."""
    delivery = services.delivery_claim(pk=delivery_pk)
    if delivery is None:
        return "not open, or claimed by another worker"
    try:
        _send(delivery)
    except SendError as exc:
        log.info(
            "delivery %s (%s, attempt %d) failed: %s",
            delivery.delivery_id,
            delivery.kind,
            delivery.attempts,
            exc.message,
        )
        if exc.permanent or delivery.attempts >= settings.NOTIFY_MAX_ATTEMPTS:
            services.delivery_failed(delivery=delivery, error=exc.message, retry_in=None)
            _count(delivery, "gave_up")
            return "gave up"
        _count(delivery, "retry")
        countdown = backoff_seconds(delivery.attempts, exc.retry_after)
        services.delivery_failed(delivery=delivery, error=exc.message, retry_in=countdown)
        # The exception is not chained into the retry: its text may quote a URL.
        raise self.retry(countdown=countdown, exc=SendError(exc.message, permanent=False)) from None
    services.delivery_sent(delivery=delivery)
    _count(delivery, "sent")
    log.info("delivery %s (%s) sent to %s", delivery.delivery_id, delivery.kind, delivery.target)
    return "sent"


@shared_task(name=enqueue.SWEEP, acks_late=True)
def sweep() -> int:
    """Re-send open deliveries whose message was lost or whose worker died mid-send."""
    rows = services.deliveries_resend_stale()
    for pk in rows:
        enqueue.send(enqueue.DELIVER, pk)
    if rows:
        log.info("re-sent %d stale deliveries", len(rows))
    return len(rows)


@shared_task(name="notifications.tasks.check_cost_caps", acks_late=True)
def check_cost_caps() -> int:
    """Tell the money caps crossed this month (docs/cost.md); returns deliveries made."""
    return len(cost_notices.check_cost_caps())


@shared_task(name="notifications.tasks.mail_cost_reports", acks_late=True)
def mail_cost_reports() -> dict[str, int]:
    """Mail last month's cost report to each tenant's admins, once (docs/cost.md)."""
    return cost_reports.mail_reports()
