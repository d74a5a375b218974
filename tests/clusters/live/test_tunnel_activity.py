"""Open tunnels and SSH sessions as use of a cluster for idle detection: the activity
pass counts them besides Ray's reading, and its note says which kept the cluster alive."""

from __future__ import annotations

import datetime
from datetime import timedelta
from typing import Any

from django.utils import timezone

from clusters.engine.idle import apply_activity
from clusters.engine.tunnel_activity import HEARTBEAT_SECONDS, with_tunnels
from clusters.kube.raydash import Activity
from clusters.models import ClusterRequest, Tunnel
from tests.frontend.conftest import make_ready


def _idle_ray(since: datetime.datetime) -> Activity:
    return Activity(active=False, last_active_at=since, reason="no Ray driver or job")


def test_an_open_ssh_session_keeps_the_cluster_alive(
    bob: Any, alice: Any, request_cluster: Any
) -> None:
    cluster = make_ready(request_cluster(bob, name="bob-tunnel"))
    now = timezone.now()
    Tunnel.objects.create(cluster=cluster, user=bob, username="bob", port=2222, purpose="ssh")
    Tunnel.objects.create(cluster=cluster, user=alice, username="alice", port=8265)
    reading = with_tunnels(cluster, _idle_ray(now - timedelta(hours=3)), now=now)
    assert reading.active
    assert reading.reason == "kept alive by 1 SSH session and 1 port-forward (alice, bob) open now"
    apply_activity(cluster, reading, now=now)
    cluster = ClusterRequest.objects.get(pk=cluster.pk)
    assert cluster.last_active_at == now
    assert cluster.activity_note.startswith("kept alive by 1 SSH session")


def test_a_tunnel_whose_web_process_died_no_longer_counts(bob: Any, request_cluster: Any) -> None:
    cluster = make_ready(request_cluster(bob, name="bob-tunnel"))
    now = timezone.now()
    stale = Tunnel.objects.create(cluster=cluster, user=bob, username="bob", port=2222)
    Tunnel.objects.filter(pk=stale.pk).update(
        seen_at=now - timedelta(seconds=3 * HEARTBEAT_SECONDS)
    )
    ray = _idle_ray(now - timedelta(hours=3))
    assert with_tunnels(cluster, ray, now=now) == ray


def test_a_tunnel_closed_since_the_last_reading_was_use_until_it_closed(
    bob: Any, request_cluster: Any
) -> None:
    cluster = make_ready(request_cluster(bob, name="bob-tunnel"))
    now = timezone.now()
    ClusterRequest.objects.filter(pk=cluster.pk).update(
        activity_checked_at=now - timedelta(minutes=5)
    )
    cluster.refresh_from_db()
    closed_at = now - timedelta(minutes=2)
    Tunnel.objects.create(
        cluster=cluster, user=bob, username="bob", port=2222, purpose="ssh", closed_at=closed_at
    )
    reading = with_tunnels(cluster, _idle_ray(now - timedelta(hours=3)), now=now)
    assert not reading.active
    assert reading.last_active_at == closed_at
    assert "last used through 1 SSH session (bob)" in reading.reason
