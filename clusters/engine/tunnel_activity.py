"""Tunnels as use of a cluster, for idle detection: a source of activity besides Ray.

An open tunnel (``gangway port-forward``, ``gangway ssh``: a :class:`~clusters.models.
Tunnel` row without ``closed_at``, touched by its web process within two heartbeats) is
use now; one that closed since the last reading was use when it closed. The reading's
note says which tunnels kept the cluster alive, and whose.
"""

from __future__ import annotations

import datetime
from dataclasses import replace
from datetime import timedelta

from django.db.models import Q

from clusters.kube.raydash import Activity
from clusters.models import ClusterRequest, Tunnel

# How often a web process touches the rows of its open tunnels.
HEARTBEAT_SECONDS = 30


def _describe(tunnels: list[Tunnel]) -> str:
    ssh = sum(1 for t in tunnels if t.purpose == "ssh")
    forwards = len(tunnels) - ssh
    parts = [
        f"{n} {what}{'s' if n > 1 else ''}"
        for n, what in ((ssh, "SSH session"), (forwards, "port-forward"))
        if n
    ]
    users = ", ".join(sorted({t.username for t in tunnels}))
    return f"{' and '.join(parts)} ({users})"


def with_tunnels(
    cluster: ClusterRequest, activity: Activity, *, now: datetime.datetime
) -> Activity:
    """Ray's reading of ``cluster`` with its tunnels counted (see the module)."""
    since = cluster.activity_checked_at or cluster.ready_at or now
    fresh = now - timedelta(seconds=2 * HEARTBEAT_SECONDS)
    rows = list(
        Tunnel.objects.filter(cluster_id=cluster.pk).filter(
            Q(closed_at__isnull=True, seen_at__gte=fresh) | Q(closed_at__gt=since)
        )
    )
    open_now = [t for t in rows if t.closed_at is None]
    if open_now:
        kept = f"kept alive by {_describe(open_now)} open now"
        reason = f"{activity.reason}; {kept}" if activity.active else kept
        return Activity(active=True, last_active_at=now, reason=reason)
    closed = [t.closed_at for t in rows if t.closed_at is not None]
    if not closed:
        return activity
    last = max(closed)
    if activity.last_active_at is not None and activity.last_active_at >= last:
        return activity
    note = f"{activity.reason}; last used through {_describe(rows)} until {last:%H:%M} UTC"
    return replace(activity, last_active_at=last, reason=note)
