"""Preemption without lost work, on the rows: the notice a running request is given, the
checkpoints its run reports, and the requeue of a preempted job that its next run
resumes from (docs/preemption.md).

A notice sets ``notice_at``, ``notice_reason`` and the deadline ``reclaim_after``; the
engine then writes it on the request's pods. A job still running at the deadline goes
back to the queue (never failed), keeping its original submission time, so its place
in line, with its last checkpoint as ``resume_from``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from clusters.domain.states import State
from clusters.models import ClusterRequest
from clusters.rows import enqueue
from clusters.rows.lifecycle import locked
from clusters.rows.transitions import note, transition

# A job in one of these is running (or about to): preempting it requeues it.
REQUEUED_BY_PREEMPTION = frozenset({State.ADMITTED, State.STARTING, State.RUNNING})
# The longest checkpoint URI kept (the column's length).
MAX_URI = 1000


def give_notice(
    row: ClusterRequest, *, deadline: datetime, reason: str, event: str, message: str
) -> None:
    """Tell a running request it will be preempted at ``deadline`` (why: ``reason``);
    the deadline, the notice and its event (``event``, for the owner's notification)
    commit together, so a request seen warned always has the event that says why."""
    now = timezone.now()
    with transaction.atomic():
        ClusterRequest.objects.filter(pk=row.pk).update(
            reclaim_after=deadline, notice_at=now, notice_reason=reason[:500]
        )
        row.reclaim_after, row.notice_at, row.notice_reason = deadline, now, reason[:500]
        note(row, reason=event, message=message)
    enqueue.reconcile()  # the pods carry the notice as soon as the engine writes it


def withdraw_notice(ids: list[int] | None = None, *, keep: list[int]) -> None:
    """The requests warned but no longer chosen are reprieved: no deadline, no notice."""
    warned = ClusterRequest.objects.unscoped().filter(reclaim_after__isnull=False)
    if ids is not None:
        warned = warned.filter(pk__in=ids)
    warned.exclude(pk__in=keep).update(reclaim_after=None, notice_at=None, notice_reason="")


def requeue_preempted(row: ClusterRequest, *, why: str) -> bool:
    """A job preempted at its deadline goes back to the queue: its GPUs are released (the
    move closes its usage span), its RayJob is suspended by the engine (KubeRay tears its
    Ray cluster down), and its next run starts from its last checkpoint. Whether it moved
    (a job no longer running is left as it is)."""
    with transaction.atomic():
        row = locked(row)
        if row.state not in REQUEUED_BY_PREEMPTION:
            return False
        resume = row.checkpoint_uri or row.resume_from
        then = (
            f"it resumes from {resume}"
            if resume
            else "no checkpoint was reported, so it starts again from the beginning"
        )
        message = f"preempted ({why}); {then}. Its GPUs were released; it keeps its place in line."
        if not transition(
            row,
            State.QUEUED,
            reason="preempted",
            message=message[:500],
            admitted_at=None,
            ready_at=None,
            expires_at=None,
            expiry_warned_at=None,
            queue_position=None,
            queue_flavor_position=None,
            queue_reason="",
            queue_message="",
            queue_eta=None,
            reclaim_after=None,
            notice_at=None,
            notice_reason="",
            resume_from=resume,
            preemptions=row.preemptions + 1,
        ):
            return False
    enqueue.admission_pass()
    return True


def record_checkpoint(row: ClusterRequest, uri: str, *, actor: Any = None) -> ClusterRequest:
    """Record the checkpoint a run reports (``uri``, already validated) and an event in
    its timeline. The newest report wins; a run may report as often as it saves."""
    now = timezone.now()
    with transaction.atomic():
        ClusterRequest.objects.filter(pk=row.pk).update(checkpoint_uri=uri, checkpointed_at=now)
        row.checkpoint_uri, row.checkpointed_at = uri, now
        note(row, reason="checkpoint_saved", message=f"checkpoint saved at {uri}", actor=actor)
    return row


def count_eviction(row: ClusterRequest) -> None:
    """A job Kueue evicted (it gives no notice): one more preemption, and its next run
    resumes from its last checkpoint, as after one of gangway's own."""
    ClusterRequest.objects.filter(pk=row.pk).update(
        preemptions=F("preemptions") + 1,
        resume_from=F("checkpoint_uri"),
        reclaim_after=None,
        notice_at=None,
        notice_reason="",
    )
