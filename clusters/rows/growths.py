"""A request's growth (:class:`~clusters.models.Growth`) on the rows: recorded by its
kind, admitted by the admission pass, taken back by a reclaim or given back by the kind.

An admitted growth is more GPUs held by the request itself: its usage span is closed and
a new one opened at the new size, so the usage ledger counts the extra GPUs while they
are held. Each step marks the request for the provision pass, where its kind writes the
size it may run at on its objects.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from decimal import Decimal

from django.db import transaction
from django.utils import timezone

from clusters.models import ClusterRequest, Growth, UsageSpan
from clusters.rows import enqueue, surges
from clusters.rows.transitions import note, usage_span


def record(
    request: ClusterRequest, *, workers: int, gpus: Decimal, cpu: Decimal, memory_gib: Decimal
) -> Growth | None:
    """Put ``request``'s growth of ``workers`` in line, or resize the one that waits (it
    keeps its place); an admitted one is left as it is (``None``). The pass is nudged."""
    with transaction.atomic():
        growth, created = surges.in_line(
            Growth, request, gpus=gpus, cpu=cpu, memory_gib=memory_gib, workers=workers
        )
        if growth.admitted_at is not None:
            return None
        if created:
            note(request, reason="growth_asked", message=f"asks for {words(growth)} more")
        elif growth.workers != workers:
            Growth.objects.filter(pk=growth.pk, admitted_at__isnull=True).update(
                workers=workers, gpus=gpus, cpu=cpu, memory_gib=memory_gib
            )
        else:
            return growth
        enqueue.admission_pass()
    return growth


def forget_waiting(request: ClusterRequest) -> bool:
    """Drop a growth that still waits (its request no longer wants it)."""
    deleted, _ = Growth.objects.filter(pk=request.pk, admitted_at__isnull=True).delete()
    return bool(deleted)


def _resize_span(request: ClusterRequest, extra: Decimal, now: datetime) -> None:
    """Close the request's open usage span and open one at its charge plus ``extra``."""
    UsageSpan.objects.filter(cluster_id=request.pk, surge=False, ended_at__isnull=True).update(
        ended_at=now
    )
    span = usage_span(request, now)
    span.gpus = request.gpus + extra
    span.save()


def admit(growths: Iterable[Growth], *, now: datetime) -> list[int]:
    """Admit waiting growths: each request holds the extra GPUs from now and is marked for
    the provision pass. Conditional on the growth still waiting and its request still
    holding GPUs; returns the requests whose growth was admitted."""
    admitted = []
    for growth in growths:
        request = growth.request
        with transaction.atomic():
            if not surges.claim(growth, now):
                continue
            _resize_span(request, growth.gpus, now)
            ClusterRequest.objects.filter(pk=request.pk).update(provision_requested_at=now)
            note(request, reason="growth_admitted", message=f"may grow by {words(growth)}")
        admitted.append(request.pk)
    if admitted:
        enqueue.provision_marked()
    return admitted


def give_back(request: ClusterRequest, *, reason: str, message: str) -> bool:
    """End an admitted growth: the request is back to its guaranteed size (its usage span
    too) and marked for the provision pass; the admission pass is nudged. Returns whether
    there was one."""
    now = timezone.now()
    with transaction.atomic():
        deleted, _ = Growth.objects.filter(pk=request.pk, admitted_at__isnull=False).delete()
        if not deleted:
            return False
        if request.holds_gpus:
            _resize_span(request, Decimal(0), now)
        ClusterRequest.objects.filter(pk=request.pk).update(provision_requested_at=now)
        note(request, reason=reason, message=message)
        enqueue.admission_pass()
        enqueue.provision_marked()
    return True


def words(growth: Growth) -> str:
    """``1 worker (1 l4 GPU)``: what a growth takes, for messages."""
    gpus = f"{growth.gpus.normalize():f}"
    plural = "" if growth.workers == 1 else "s"
    return f"{growth.workers} worker{plural} ({gpus} {growth.flavor.name} GPU" + (
        ")" if growth.gpus == 1 else "s)"
    )
