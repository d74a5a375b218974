"""Informers (clusters/kube/informer.py) against kubesim's watch, and reconcile passes
that read their caches instead of listing (clusters/engine/informers.py).

Waits here are upper bounds (a test fails after them, never passes because of them).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from clusters import tasks
from clusters.domain.states import State
from clusters.engine import informers, reconciler
from clusters.engine.reconciler import reconcile_once
from clusters.kube import informer as informer_module
from clusters.kube import labels
from clusters.kube.gateway import get_gateway
from clusters.kube.informer import Informer
from clusters.models import ClusterRequest, PendingPass
from clusters.rows import enqueue
from kubesim import KubeSim
from tests.clusters.engine.conftest import wait_for
from tests.clusters.engine.test_reconcile_cost import _provisioning_clusters, kube_requests

MANAGED = "test.gangway.dev/informer=yes"


def _namespace(name: str, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "labels": {"test.gangway.dev/informer": "yes", **labels}},
    }


def _names(informer: Informer) -> dict[str, dict[str, str]]:
    view = informer.view(now=time.time(), grace=0)
    assert view is not None, "the informer's watch is not open"
    return {o["metadata"]["name"]: o["metadata"].get("labels") or {} for o in view.items}


def _caught_up(informer: Informer, timeout: float = 10.0) -> bool:
    """Whether the cache reaches the server's version as of now (the informer's own
    freshness rule; a test makes a write of the kind first, so that it can)."""
    gw = get_gateway()
    return informer.wait_for(gw.current_version(), time.time(), timeout)


@pytest.fixture
def namespaces(kubesim: KubeSim) -> Iterator[Informer]:
    gw = get_gateway()
    informer = Informer(gw, "v1", "Namespace", label_selector=MANAGED).start()
    try:
        assert informer.wait_until_watching(10)
        yield informer
    finally:
        informer.stop()


def test_an_informer_lists_once_then_follows_every_change(namespaces: Informer) -> None:
    gw = get_gateway()
    gw.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}})
    gw.apply(_namespace("team-a"))
    gw.apply(_namespace("team-b"))
    assert _caught_up(namespaces)
    assert set(_names(namespaces)) == {"team-a", "team-b"}
    gw.delete("v1", "Namespace", "team-b")
    wait_for(lambda: "team-b" not in _names(namespaces), timeout=10, what="the deletion")
    gw.apply(_namespace("team-a", tier="gold"))
    assert _caught_up(namespaces)
    assert _names(namespaces)["team-a"]["tier"] == "gold"
    # The cache is what a LIST says, from one list and one watch.
    listed = {o["metadata"]["name"] for o in gw.list("v1", "Namespace", label_selector=MANAGED)}
    assert set(_names(namespaces)) == listed
    assert namespaces.lists == 1 and namespaces.watches == 1


def test_a_probe_of_a_quiet_kind_is_confirmed_by_its_next_event(
    namespaces: Informer,
) -> None:
    gw = get_gateway()
    gw.apply(_namespace("team-a"))
    assert _caught_up(namespaces)
    # A write of another kind moves the server's version past the namespaces' own.
    gw.apply(
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": "x", "namespace": "team-a"},
        }
    )
    read_at = time.time()
    assert not namespaces.wait_for(gw.current_version(), read_at, 0.2)
    view = namespaces.view(now=time.time(), grace=3600)
    assert view is not None and view.fresh_at < read_at
    gw.apply(_namespace("team-c"))
    wait_for(
        lambda: namespaces.view(now=time.time(), grace=3600).fresh_at >= read_at,  # type: ignore[union-attr]
        timeout=10,
        what="the probe confirmed by the namespace's event",
    )


def test_a_watch_the_server_ended_resumes_from_its_version_without_listing(
    kubesim: KubeSim, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(informer_module, "WATCH_SECONDS", 1)  # each watch lasts a second
    gw = get_gateway()
    namespaces = Informer(gw, "v1", "Namespace", label_selector=MANAGED).start()
    try:
        gw.apply(_namespace("team-a"))
        wait_for(lambda: namespaces.watches >= 3, timeout=10, what="watches ended, resumed")
        gw.apply(_namespace("team-b"))
        assert _caught_up(namespaces)
        assert set(_names(namespaces)) == {"team-a", "team-b"}
        assert namespaces.lists == 1
    finally:
        namespaces.stop()


def test_a_version_the_server_no_longer_keeps_is_listed_again(tmp_path: Any, settings: Any) -> None:
    sim = KubeSim(fleet=None, port=0, startup_delay=0.0, watch_history=20).start()
    try:
        settings.KUBECONFIG = sim.write_kubeconfig(str(tmp_path / "kubeconfig"))
        gw = get_gateway()
        informer = Informer(gw, "v1", "Namespace", label_selector=MANAGED)
        informer._list()  # the list, then more writes than the history keeps
        for i in range(30):
            gw.apply(_namespace(f"team-{i}"))
        informer.start()
        try:
            wait_for(lambda: informer.lists == 2, timeout=10, what="a second list after 410")
            assert informer.wait_until_watching(10)
            assert len(_names(informer)) == 30
        finally:
            informer.stop()
    finally:
        sim.stop()


# -- reconcile passes on the caches -----------------------------------------------------


@pytest.fixture
def watching(settings: Any) -> Iterator[None]:
    settings.RECONCILE_WATCH = True
    settings.RECONCILE_WATCH_NUDGE_SECONDS = 0  # nudges are tested on their own
    yield
    informers.stop()


def _all_watching() -> None:
    caches = informers.caches({})
    assert caches is not None
    for informer in caches.informers.values():
        assert informer.wait_until_watching(10), informer.kind


def test_a_pass_on_the_caches_lists_nothing_and_folds_what_a_list_would(
    kubesim: Any, watching: None, acme: Any, bob: Any, h100: Any
) -> None:
    _provisioning_clusters(3, acme, bob, h100)
    reconcile_once()  # starts the informers (this pass lists: no watch is open yet)
    _all_watching()
    ready = wait_for(
        lambda: (
            ClusterRequest.objects.filter(state=State.READY).count() == 3 or reconcile_once().ready
        ),
        timeout=20,
        what="the clusters ready",
    )
    assert ready
    with kube_requests() as calls:
        report = reconcile_once()
    # One request: the API server's current version, which the caches are waited for.
    assert calls == {"GET": 1}
    assert not report.errors and not report.recreated
    # A RayCluster deleted behind the engine's back is seen through the watch and applied
    # again, as a list would have shown.
    row = ClusterRequest.objects.order_by("pk").first()
    assert row is not None
    gw = get_gateway()
    gw.delete("ray.io/v1", "RayCluster", row.name, row.namespace)
    recreated = wait_for(lambda: reconcile_once().recreated, timeout=20, what="recreated")
    assert recreated == [row.pk]
    assert gw.get("ray.io/v1", "RayCluster", row.name, row.namespace) is not None


def test_a_row_that_moved_after_its_cache_was_fresh_is_deferred(
    kubesim: Any, watching: None, settings: Any, acme: Any, bob: Any, h100: Any
) -> None:
    settings.RECONCILE_WATCH_GRACE_SECONDS = 3600  # only probes make a cache fresh
    _provisioning_clusters(1, acme, bob, h100)
    reconcile_once()
    _all_watching()
    row = ClusterRequest.objects.get()
    get_gateway().delete("ray.io/v1", "RayCluster", row.name, row.namespace)
    # The row moved after every write the RayCluster cache holds, and nothing of that kind
    # happens since: the pass cannot tell whether the cache lacks a newer RayCluster.
    ClusterRequest.objects.filter(pk=row.pk).update(progress_at=timezone.now())
    get_gateway().apply(_namespace("unrelated"))  # the server's version moves on
    report = reconcile_once()
    assert report.deferred == [row.pk] and not report.recreated
    # Once the cache is fresh past the row's move, the absence counts.
    settings.RECONCILE_WATCH_GRACE_SECONDS = 0
    assert reconcile_once().recreated == [row.pk]


def _quiet_rayclusters_then_gone(row: ClusterRequest) -> None:
    """Delete ``row``'s RayCluster and wait for its pods to go, then make the server's
    version move on with a write of another kind: the RayCluster cache cannot reach it."""
    gw = get_gateway()
    gw.delete("ray.io/v1", "RayCluster", row.name, row.namespace)
    wait_for(
        lambda: (
            not gw.list(
                "v1", "Pod", namespace=row.namespace, label_selector=f"ray.io/cluster={row.name}"
            )
        ),
        timeout=20,
        what="the pods gone",
    )
    gw.apply(_namespace("unrelated"))


def test_a_row_still_in_doubt_after_its_move_reads_its_object_directly(
    kubesim: Any,
    watching: None,
    settings: Any,
    monkeypatch: Any,
    acme: Any,
    bob: Any,
    h100: Any,
) -> None:
    settings.RECONCILE_WATCH_GRACE_SECONDS = 3600  # only probes make a cache fresh
    _provisioning_clusters(1, acme, bob, h100)
    reconcile_once()
    _all_watching()
    row = ClusterRequest.objects.get()
    _quiet_rayclusters_then_gone(row)
    ClusterRequest.objects.filter(pk=row.pk).update(progress_at=timezone.now())
    # The move is after every write the cache holds, and old enough (the wait is made
    # none here) for a busy kind's cache to have caught up: this one is of a quiet kind,
    # and the pass asks the API server for that one RayCluster.
    monkeypatch.setattr(reconciler, "READ_THROUGH_AFTER", timedelta(0))
    with kube_requests() as calls:
        report = reconcile_once()
    assert report.read_through == 1 and not report.deferred
    assert report.recreated == [row.pk]
    # The version the caches wait for, then the direct read; the recreation writes.
    assert calls["GET"] == 2
    assert get_gateway().get("ray.io/v1", "RayCluster", row.name, row.namespace) is not None


def test_the_last_deletion_of_a_burst_is_finished_without_waiting_for_the_grace(
    kubesim: Any,
    watching: None,
    settings: Any,
    monkeypatch: Any,
    acme: Any,
    bob: Any,
    h100: Any,
) -> None:
    settings.RECONCILE_WATCH_GRACE_SECONDS = 3600  # only probes make a cache fresh
    _provisioning_clusters(1, acme, bob, h100)
    reconcile_once()
    _all_watching()
    row = ClusterRequest.objects.get()
    # The delete service's move, then the provision pass's DELETE, the last RayCluster
    # write there is: nothing of that kind follows to confirm the cache.
    ClusterRequest.objects.filter(pk=row.pk).update(
        state=State.DELETING, progress_at=timezone.now()
    )
    _quiet_rayclusters_then_gone(row)
    report = reconcile_once()
    assert report.deferred == [row.pk] and report.read_through == 0  # moved just now
    monkeypatch.setattr(reconciler, "READ_THROUGH_AFTER", timedelta(0))  # now it is old
    report = reconcile_once()
    assert report.deleted == [row.pk] and report.read_through == 1 and not report.deferred
    assert ClusterRequest.objects.get(pk=row.pk).state == State.DELETED


def test_a_pass_that_deferred_rows_asks_for_the_next(
    transactional_db: Any, kubesim: Any, settings: Any, acme: Any, bob: Any, h100: Any
) -> None:
    settings.RECONCILE_WATCH = True
    settings.RECONCILE_WATCH_NUDGE_SECONDS = 0
    settings.RECONCILE_WATCH_GRACE_SECONDS = 3600
    try:
        _provisioning_clusters(1, acme, bob, h100)
        reconcile_once()
        _all_watching()
        row = ClusterRequest.objects.get()
        ClusterRequest.objects.filter(pk=row.pk).update(
            state=State.DELETING, progress_at=timezone.now()
        )
        _quiet_rayclusters_then_gone(row)
        PendingPass.objects.filter(name=enqueue.PASSES[enqueue.RECONCILE]).update(requested_at=None)
        assert tasks.reconcile()["deferred"] == 1
        assert enqueue.is_requested(enqueue.RECONCILE)
    finally:
        informers.stop()


def test_a_cluster_row_waits_only_for_the_freshness_of_the_rayclusters_cache(
    kubesim: Any, watching: None, settings: Any, acme: Any, bob: Any, h100: Any
) -> None:
    settings.RECONCILE_WATCH_GRACE_SECONDS = 3600  # only probes make a cache fresh
    _provisioning_clusters(2, acme, bob, h100)
    reconcile_once()
    _all_watching()
    row, other = ClusterRequest.objects.order_by("pk")
    gw = get_gateway()
    gw.delete("ray.io/v1", "RayCluster", row.name, row.namespace)
    wait_for(
        lambda: (
            not gw.list(
                "v1", "Pod", namespace=row.namespace, label_selector=f"ray.io/cluster={row.name}"
            )
        ),
        timeout=20,
        what="the pods gone",
    )
    ClusterRequest.objects.filter(pk=row.pk).update(progress_at=timezone.now())
    # The last write is a RayCluster's: the pass's probe finds that cache fresh past the
    # row's move. No RayJob exists, so that cache cannot be, and it does not matter here.
    gw.merge_patch(
        "ray.io/v1",
        "RayCluster",
        other.name,
        {"metadata": {"annotations": {"test.gangway.dev/touched": "1"}}},
        other.namespace,
    )
    report = reconcile_once()
    assert report.recreated == [row.pk] and not report.deferred


def test_a_change_in_the_cluster_asks_for_a_reconcile_pass(
    transactional_db: Any, kubesim: Any, settings: Any
) -> None:
    settings.RECONCILE_WATCH = True
    settings.RECONCILE_WATCH_NUDGE_SECONDS = 0.05
    try:
        reconcile_once()
        _all_watching()
        PendingPass.objects.filter(name=enqueue.PASSES[enqueue.RECONCILE]).update(requested_at=None)
        get_gateway().apply(
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": "team-x", "labels": {labels.MANAGED_BY: labels.MANAGER}},
            }
        )
        wait_for(
            lambda: enqueue.is_requested(enqueue.RECONCILE),
            timeout=10,
            what="a reconcile pass asked for by the watch",
        )
    finally:
        informers.stop()
