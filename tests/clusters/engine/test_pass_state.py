"""What one reconcile pass reads and reports (clusters.engine.pass_state): when its
report says capacity was freed or may now place a waiting request, and how its reads
are looked up by object kind."""

from __future__ import annotations

from datetime import UTC, datetime

from clusters.engine.pass_state import Report, Seen


def test_freed_capacity_is_any_deletion_expiry_release_or_provisioned_nodes() -> None:
    assert not Report().freed_capacity
    for field in ("deleted", "expired", "released", "provisioned"):
        report = Report()
        getattr(report, field).append(7)
        assert report.freed_capacity, field
    # Going ready frees nothing, though it may make room for a waiting request.
    ready = Report(ready=[7])
    assert not ready.freed_capacity and ready.placeable_grew


def test_placeable_grew_when_rows_went_ready_or_the_cluster_has_more_free() -> None:
    assert not Report().placeable_grew
    assert Report(capacity_grew=True).placeable_grew


def test_seen_finds_an_object_by_kind_and_key_and_nothing_elsewhere() -> None:
    obj = {"metadata": {"name": "a", "namespace": "t-acme"}}
    seen = Seen(
        objects={"RayCluster": {("t-acme", "a"): obj}},
        pods={},
        pods_by_id={},
        namespaces={"t-acme"},
        events={},
        listed_at={"RayCluster": datetime(2026, 1, 1, tzinfo=UTC)},
    )
    assert seen.object("RayCluster", ("t-acme", "a")) is obj
    assert seen.object("RayCluster", ("t-acme", "b")) is None
    assert seen.object("RayJob", ("t-acme", "a")) is None  # a kind the pass did not read
