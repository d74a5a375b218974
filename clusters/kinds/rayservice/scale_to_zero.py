"""Scale to zero: a service with the option on that received no endpoint request for its
window gives its GPUs back; the next request to its endpoint wakes it.

The idle-reclaim pass (``clusters.tasks.check_activity``, through ``Kind.idle_reclaim``)
runs :func:`reclaim_idle`: a ready service idle since its last request (or since it
became ready) for ``scale_to_zero_after_minutes`` moves to ``suspended``, which gives
its GPUs back and closes its usage span; the provision pass deletes its RayService, so
its pods go. :func:`wake` puts it back in the queue like any request (it may wait for
quota); until it is ready again its endpoint answers 503 with ``Retry-After``.
"""

from __future__ import annotations

import datetime
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from clusters.domain.states import State
from clusters.kinds.rayservice import endpoint_counts
from clusters.models import ClusterRequest, Service, Surge, Workload
from clusters.queue.backends import queue_backend
from clusters.queue.writeback import place_on
from clusters.rows import enqueue, lifecycle
from clusters.rows.transitions import transition
from tenants.audit import audit_record

REASON = "scaled_to_zero"


def idle_since(row: ClusterRequest, cached: datetime.datetime | None) -> datetime.datetime:
    """When the service was last used: its last request (the row's, or the cache's newer
    one) or, if none came since, when it became ready."""
    moments = [m for m in (row.service.last_request_at, cached, row.ready_at) if m]
    return max(moments) if moments else row.updated_at


def reclaim_idle(*, now: datetime.datetime | None = None) -> list[str]:
    """Scale to zero every ready service with the option on whose window without requests
    has passed; the names of those scaled. A service being upgraded waits for the
    upgrade's end. Each move is conditional on the row as read."""
    now = now or timezone.now()
    ready = list(
        ClusterRequest.objects.unscoped()
        .filter(workload=Workload.SERVICE, state=State.READY, service__isnull=False)
        .select_related("service", "tenant")
        .order_by("pk")
    )
    # A woken service serves again: it is no longer waking.
    woken = [row.pk for row in ready if row.service.woken_at is not None]
    if woken:
        Service.objects.filter(pk__in=woken).update(woken_at=None)
    candidates = [row for row in ready if row.service.scale_to_zero]
    upgrading = set(
        Surge.objects.filter(pk__in=[r.pk for r in candidates]).values_list("pk", flat=True)
    )
    cached = endpoint_counts.last_requests(row.pk for row in candidates)
    scaled: list[str] = []
    for row in candidates:
        if row.pk in upgrading or row.service.upgrading:
            continue
        window = timedelta(minutes=row.service.scale_to_zero_after_minutes)
        if now - idle_since(row, cached.get(row.pk)) >= window and _scale(row, now):
            scaled.append(row.name)
    return scaled


def _scale(row: ClusterRequest, now: datetime.datetime) -> bool:
    """Move one idle ready service to ``suspended`` (its GPUs back, its RayService to be
    deleted); ``False`` when it changed since it was read or a request just came."""
    with transaction.atomic():
        current = lifecycle.locked(row)
        if current.state != State.READY or current.ready_at != row.ready_at:
            return False
        current.service = details = Service.objects.select_for_update().get(pk=row.pk)
        last = endpoint_counts.last_requests([row.pk]).get(row.pk)
        if not details.scale_to_zero or (
            now - idle_since(current, last) < timedelta(minutes=details.scale_to_zero_after_minutes)
        ):
            return False  # a request came, or the option changed, since the row was read
        minutes = details.scale_to_zero_after_minutes
        if not transition(
            current,
            State.SUSPENDED,
            reason=REASON,
            message=f"scaled to zero after {minutes} min without requests: its GPUs were "
            "released; the next request to its endpoint wakes it",
            suspended_at=now,
            ready_at=None,
            provision_requested_at=now,
        ):
            return False
        # What KubeRay reported is of the RayService about to go; a woken one starts anew.
        Service.objects.filter(pk=row.pk).update(
            applications={},
            active_cluster="",
            pending_cluster="",
            upgrading=False,
            traffic={},
            serve_endpoints=0,
            woken_at=None,
        )
        audit_record(
            actor=None,
            action="service.scale_to_zero",
            obj=current,
            tenant=current.tenant,
            data={"after_minutes": minutes},
        )
        enqueue.provision_marked()  # deletes its RayService
        enqueue.admission_pass()  # its GPUs may start a waiting request
    return True


def wake(row: ClusterRequest) -> ClusterRequest:
    """Put a scaled-to-zero service back in the queue (a request reached its endpoint);
    a service in any other state is returned as it is."""
    now = timezone.now()
    with transaction.atomic():
        current = lifecycle.locked(row)
        if current.state != State.SUSPENDED:
            return current
        # Back in the queue on its first preference (it may have run on another).
        accepted = list(current.accepted_flavors or [])
        placed = place_on(current, accepted[0]) if len(accepted) > 1 else {}
        if not transition(
            current,
            State.QUEUED,
            reason="woken",
            message="a request to its endpoint woke it: back in the queue (cold start)",
            **placed,
        ):
            return current
        Service.objects.filter(pk=current.pk).update(woken_at=now)
        audit_record(actor=None, action="service.wake", obj=current, tenant=current.tenant)
        queue_backend().request_queued(current.pk)
    endpoint_counts.request_seen(current.pk, now)
    return current
