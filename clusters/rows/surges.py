"""A request's surge (:class:`~clusters.models.Surge`) on the rows: recorded by a kind,
admitted by the admission pass, released by the kind, and put back in line when its
request gives its GPUs back.

The shared code knows no reason a request surges; a kind records a surge with the GPUs
it needs and what they are for (``change``), carries the change out once the surge is
admitted (:func:`mark_applied`) and releases it when it is over (:func:`release`).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from decimal import Decimal
from typing import Any, TypeVar

from django.db import transaction
from django.utils import timezone

from clusters.models import ClusterRequest, QueuedGpus, Surge, UsageSpan
from clusters.rows import enqueue
from clusters.rows.transitions import note, usage_span

Queued = TypeVar("Queued", bound=QueuedGpus)


def record(
    request: ClusterRequest,
    *,
    gpus: Decimal,
    cpu: Decimal,
    memory_gib: Decimal,
    purpose: str,
    change: dict[str, Any],
) -> Surge:
    """Put ``request``'s surge in line for the admission pass (or, while it still waits,
    replace what it is for: it keeps its place). Call inside the caller's transaction,
    with the request locked; the pass is nudged after commit."""
    surge, created = in_line(
        Surge,
        request,
        gpus=gpus,
        cpu=cpu,
        memory_gib=memory_gib,
        purpose=purpose,
        change=change,
    )
    if not created:
        surge.change = change
        surge.save(update_fields=["change"])
    enqueue.admission_pass()
    return surge


def admit(surges: Iterable[tuple[Surge, ClusterRequest]], *, now: datetime) -> list[int]:
    """Admit waiting surges: each holds its GPUs from now (a usage span of its own) and
    its request is marked for the provision pass, where its kind carries the change out.
    Conditional on the surge still waiting and its request still holding GPUs; returns
    the requests whose surge was admitted."""
    admitted = []
    for surge, request in surges:
        with transaction.atomic():
            if not claim(surge, now):
                continue
            usage_span(request, now, surge=surge).save()
            ClusterRequest.objects.filter(pk=request.pk).update(provision_requested_at=now)
            note(
                request,
                reason="surge_admitted",
                message=f"admitted {words(surge)} beside the GPUs it holds",
            )
        admitted.append(request.pk)
    if admitted:
        enqueue.provision_marked()
    return admitted


def in_line(
    model: type[Queued],
    request: ClusterRequest,
    *,
    gpus: Decimal,
    cpu: Decimal,
    memory_gib: Decimal,
    **more: Any,
) -> tuple[Queued, bool]:
    """``request``'s surge or growth (``model``), locked, or a new one put in line for
    these GPUs on its flavor (with ``more`` of its own fields); whether it is new."""
    rows: Any = model._default_manager  # each concrete model has its ``request``
    found: tuple[Queued, bool] = rows.select_for_update().get_or_create(
        request=request,
        defaults={
            "flavor_id": request.flavor_id,
            "gpus": gpus,
            "cpu": cpu,
            "memory_gib": memory_gib,
            **more,
        },
    )
    return found


def claim(row: QueuedGpus, now: datetime) -> bool:
    """Mark a waiting surge or growth admitted now (its standing cleared), if it still
    waits and its request still holds GPUs; whether it did."""
    # Each concrete model has its ``request``; the abstract one names none.
    rows: Any = type(row)._default_manager
    return bool(
        rows.filter(pk=row.pk, admitted_at__isnull=True, request__holds_gpus=True).update(
            admitted_at=now,
            queue_position=None,
            queue_reason="",
            queue_message="",
            queue_eta=None,
        )
    )


def mark_applied(request: ClusterRequest) -> None:
    """The kind carried its admitted surge's change out (in its own transaction)."""
    Surge.objects.filter(pk=request.pk, admitted_at__isnull=False).update(applied_at=timezone.now())


def release(request: ClusterRequest, *, message: str) -> bool:
    """Give an admitted surge's GPUs back (its usage span closes) and forget it; the
    admission pass is nudged. Returns whether there was one to release."""
    now = timezone.now()
    with transaction.atomic():
        deleted, _ = Surge.objects.filter(pk=request.pk, admitted_at__isnull=False).delete()
        if not deleted:
            return False
        UsageSpan.objects.filter(cluster_id=request.pk, surge=True, ended_at__isnull=True).update(
            ended_at=now
        )
        note(request, reason="surge_released", message=message)
        enqueue.admission_pass()
    return True


def words(surge: Surge) -> str:
    """``8 h100 GPUs``: what a surge takes, for messages."""
    gpus = f"{surge.gpus.normalize():f}"
    return f"{gpus} {surge.flavor.name} GPU{'' if surge.gpus == 1 else 's'}"
