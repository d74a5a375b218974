"""What the reconcile passes over a fleet member tell of it: a pass that ran marks it
synced (``last_sync_at``) and reachable; passes that failed in a row mark it unreachable
after :data:`UNREACHABLE_AFTER_FAILURES`, and its rows stale (they keep their last known
state, read at ``last_sync_at``) until a pass runs again; so are the rows not placed by
admission, which run on the home member, when that one is. The time from the first
failed pass to the mark is kept as ``detect_seconds``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db.models import F, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone

from clusters.domain.states import State
from clusters.kube.connection import HOME_FIRST, home_member
from clusters.models import ClusterRequest, KubeCluster

# Failed passes in a row that mark a member unreachable: one may be a blip (a restart
# of its API server, a dropped connection), two a few seconds apart are not.
UNREACHABLE_AFTER_FAILURES = 2
# Rows in these states have no objects to be stale about.
NOT_PLACED = (State.QUEUED, State.DELETED)


def pass_succeeded(member: KubeCluster) -> None:
    """A pass over ``member`` ran to its end: synced now, reachable again."""
    KubeCluster.objects.filter(pk=member.pk).update(
        last_sync_at=timezone.now(),
        reachable=True,
        failing_since=None,
        failed_passes=0,
        unreachable_since=None,
    )


def pass_failed(member: KubeCluster, error: str) -> bool:
    """A pass over ``member`` could not run (its API server did not answer); returns
    whether this one marked it unreachable."""
    now = timezone.now()
    KubeCluster.objects.filter(pk=member.pk, failing_since__isnull=True).update(failing_since=now)
    KubeCluster.objects.filter(pk=member.pk).update(
        failed_passes=F("failed_passes") + 1, health_message=error[:500]
    )
    found = KubeCluster.objects.filter(pk=member.pk).first()
    if found is None:
        return False  # removed from the fleet meanwhile
    if found.unreachable_since is not None or found.failed_passes < UNREACHABLE_AFTER_FAILURES:
        return False
    since = found.failing_since or now
    return bool(
        KubeCluster.objects.filter(pk=member.pk, unreachable_since__isnull=True).update(
            reachable=False,
            unreachable_since=now,
            detect_seconds=(now - since).total_seconds(),
        )
    )


def is_stale(request: ClusterRequest, member: KubeCluster | None) -> bool:
    """Whether what the row says of Kubernetes may be out of date: it is placed on
    ``member`` (its ``kube_cluster``) and that member is not reachable."""
    return member is not None and member.reachable is False and request.state not in NOT_PLACED


def stale_since(request: ClusterRequest, member: KubeCluster | None) -> datetime | None:
    """Since when the row's truth was last read (its member's last sync), when stale."""
    if member is None or not is_stale(request, member):
        return None
    return _since(member)


def _since(member: KubeCluster) -> datetime | None:
    return (
        member.last_sync_at or member.failing_since or member.unreachable_since or member.checked_at
    )


def home_annotations() -> dict[str, Any]:
    """Annotations of a query of rows with what :func:`staleness` needs of the home
    member (``home_reachable``, ``home_read_at``): two scalar subqueries that the
    database runs once per query, not once per row."""
    home = KubeCluster.objects.order_by(*HOME_FIRST)
    read_at = Coalesce("last_sync_at", "failing_since", "unreachable_since", "checked_at")
    return {
        "home_reachable": Subquery(home.values("reachable")[:1]),
        "home_read_at": Subquery(home.annotate(read_at=read_at).values("read_at")[:1]),
    }


def staleness(request: ClusterRequest) -> tuple[bool, datetime | None]:
    """Whether ``request``'s state is stale, and since when it was last read: placed on a
    member, that member's (the row's joined ``kube_cluster``); not placed, the home
    member's, from :func:`home_annotations` when the query has them (else one query)."""
    if request.kube_cluster_id is not None:
        member = request.kube_cluster
        return is_stale(request, member), stale_since(request, member)
    if request.state in NOT_PLACED:
        return False, None
    if hasattr(request, "home_reachable"):
        down = request.home_reachable is False
        return down, request.home_read_at if down else None  # type: ignore[attr-defined]
    home = home_member()
    return is_stale(request, home), stale_since(request, home)
