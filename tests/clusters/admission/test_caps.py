"""The per-engineer caps: one rule (clusters.admission.caps), counted the same way by
the admission pass — an owner's suspended clusters and the queued requests ahead of a
request count, as submission counts every live dev cluster."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal

from clusters.admission import USER_CAP, Parked, TenantQ, decide
from clusters.admission.caps import user_cap_breach
from tests.clusters.admission.helpers import NOW, minutes, pending, running, snapshot


def test_the_rule() -> None:
    assert (
        user_cap_breach(
            max_clusters=2, max_gpus=None, clusters=1, gpus=Decimal(5), more_gpus=Decimal(9)
        )
        is None
    )
    over = user_cap_breach(
        max_clusters=2, max_gpus=4, clusters=2, gpus=Decimal(0), more_gpus=Decimal(1)
    )
    assert over is not None and (over.limit, over.cap) == ("clusters", 2)
    gpus = user_cap_breach(
        max_clusters=None, max_gpus=4, clusters=0, gpus=Decimal(3), more_gpus=Decimal(2)
    )
    assert gpus is not None and gpus.limit == "gpus"


def test_a_suspended_cluster_counts_in_admission() -> None:
    snap = snapshot(
        tenants=[TenantQ("acme", max_dev_clusters_per_user=1), TenantQ("globex")],
        pending=[pending(10, "acme", 1, owner=7)],
    )
    assert decide(snap).admitted == [10]
    parked = replace(snap, parked=[Parked(tenant="acme", owner=7, gpus=Decimal(1))])
    status = decide(parked).waiting[10]
    assert status.reason == USER_CAP


def test_queued_requests_ahead_count_and_the_front_goes_first() -> None:
    """A cap lowered below what an owner has queued admits the oldest first."""
    snap = snapshot(
        tenants=[TenantQ("acme", max_dev_gpus_per_user=2), TenantQ("globex")],
        running=[running(1, "globex", 1)],
        pending=[
            pending(11, "acme", 1, owner=7, created_at=NOW - minutes(2)),
            pending(12, "acme", 1, owner=7, created_at=NOW - minutes(1)),
            pending(10, "acme", 1, owner=7, created_at=NOW - minutes(3)),
        ],
    )
    decision = decide(snap)
    assert decision.admitted == [10, 11]
    assert decision.waiting[12].reason == USER_CAP


def test_a_queued_request_ahead_holds_back_a_later_one_over_the_cap() -> None:
    """Without this, an engineer at the cap could queue a second request behind a blocked
    one and have it admitted: the cap would be dodged by queueing."""
    tenants = [
        TenantQ("acme", cpu_quota=10, max_dev_clusters_per_user=1),
        TenantQ("globex"),
    ]
    snap = snapshot(
        tenants=tenants,
        pending=[
            # Older, and blocked by the tenant's CPU quota.
            pending(10, "acme", 1, owner=7, cpu=Decimal(12), created_at=NOW - minutes(2)),
            pending(11, "acme", 1, owner=7, cpu=Decimal(2), created_at=NOW - minutes(1)),
        ],
    )
    decision = decide(snap)
    assert decision.admitted == []
    assert decision.waiting[11].reason == USER_CAP
    # Another engineer's request is not held back by it.
    other = replace(snap, pending=[*snap.pending, pending(12, "acme", 1, owner=8, cpu=Decimal(2))])
    assert decide(other).admitted == [12]
