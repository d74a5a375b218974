"""The gateway against kubesim over HTTP: apply, get, list, delete and error classes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from clusters.kube.gateway import (
    Gateway,
    PermanentKubeError,
    TransientKubeError,
    get_gateway,
)
from clusters.tasks import backoff_seconds
from kubesim import KubeSim

NS = {
    "apiVersion": "v1",
    "kind": "Namespace",
    "metadata": {"name": "gw-t", "labels": {"app.kubernetes.io/managed-by": "gangway"}},
}


@pytest.fixture
def sim(tmp_path: Path, settings: Any) -> Iterator[KubeSim]:
    server = KubeSim(fleet=None, port=0, startup_delay=0.0).start()
    server.write_kubeconfig(str(tmp_path / "kubeconfig"))
    settings.KUBECONFIG = str(tmp_path / "kubeconfig")
    yield server
    server.stop()


@pytest.fixture
def gw(sim: KubeSim) -> Gateway:
    return get_gateway()


def test_apply_is_idempotent_and_list_filters_by_label(gw: Gateway) -> None:
    first = gw.apply(NS)
    second = gw.apply(NS)
    assert first["metadata"]["uid"] == second["metadata"]["uid"]
    names = [
        n["metadata"]["name"]
        for n in gw.list("v1", "Namespace", label_selector="app.kubernetes.io/managed-by=gangway")
    ]
    assert names == ["gw-t"]
    assert len(gw.list("v1", "Node")) == 11  # the demo fleet


def _seven_labelled_accounts(gw: Gateway) -> None:
    """The namespace and seven ServiceAccounts in it labelled ``x=y``: a list of several
    pages at a small page size."""
    gw.apply(NS)
    for i in range(7):
        gw.apply(
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": f"sa-{i}", "namespace": "gw-t", "labels": {"x": "y"}},
            }
        )


def test_list_pages_through_continue_tokens(gw: Gateway) -> None:
    _seven_labelled_accounts(gw)
    items = gw.list("v1", "ServiceAccount", label_selector="x=y", page_size=3)
    assert sorted(i["metadata"]["name"] for i in items) == [f"sa-{i}" for i in range(7)]


def test_a_list_asks_again_for_a_page_that_failed(gw: Gateway, sim: KubeSim) -> None:
    # Half the requests fail (seeded), and every page holds 2 items: a list of 7 takes 4
    # pages, each tried until it is answered. Without retries a reconcile pass over many
    # pages almost never got through (the Kubernetes API suite of `make reliability`).
    _seven_labelled_accounts(gw)
    sim.set_faults(rate=0.5, codes=(500, 503, 0), seed=11, max_page=2)
    for _ in range(5):
        items = gw.list("v1", "ServiceAccount", label_selector="x=y")
        assert sorted(i["metadata"]["name"] for i in items) == [f"sa-{i}" for i in range(7)]
    assert sum(sim.faults.stats()["faults"].values()) >= 5


def test_missing_objects_are_none_and_deleting_them_succeeds(gw: Gateway) -> None:
    assert gw.get("ray.io/v1", "RayCluster", "nope", "gw-t") is None
    assert gw.delete("ray.io/v1", "RayCluster", "nope", "gw-t") is False


def test_invalid_object_is_permanent_with_the_field_named(gw: Gateway, sim: KubeSim) -> None:
    gw.apply(NS)
    bad = {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": "bad", "namespace": "gw-t"},
        "spec": {"headGroupSpec": "not-an-object"},
    }
    with pytest.raises(PermanentKubeError) as caught:
        gw.apply(bad)
    assert caught.value.status == 422
    assert "spec.headGroupSpec" in caught.value.message


@pytest.mark.parametrize("code", [500, 503, 409, 429])
def test_server_errors_conflicts_and_throttling_are_transient(
    gw: Gateway, sim: KubeSim, code: int
) -> None:
    sim.set_faults(rate=1.0, codes=(code,), retry_after=3)
    with pytest.raises(TransientKubeError) as caught:
        gw.version()
    assert caught.value.status == code
    if code == 429:
        assert caught.value.retry_after == 3.0


def test_a_node_proxy_read_throttled_by_a_429_is_not_sent_again_before_its_retry_after(
    gw: Gateway, sim: KubeSim
) -> None:
    """The DCGM reader's node proxy GET answers the 429 as a status, and then holds the
    path as every other read of the gateway does (the reliability suite's
    ``reads_too_soon`` found it asking again within a second)."""
    sim.set_faults(rate=1.0, codes=(429,), retry_after=3)
    status, _ = gw.node_proxy_get("node-a", 9400, "metrics", limit=1024)
    assert status == 429 and sim.faults.injected["total"] == 1
    with pytest.raises(TransientKubeError) as held:
        gw.node_proxy_get("node-a", 9400, "metrics", limit=1024)
    assert held.value.status == 429 and held.value.retry_after
    assert 0 < held.value.retry_after <= 3.0
    assert sim.faults.injected["total"] == 1  # the second one was never sent


def test_unreachable_api_is_transient(gw: Gateway, sim: KubeSim) -> None:
    sim.stop()
    with pytest.raises(TransientKubeError, match="cannot reach"):
        gw.version()
    sim.start()


def test_backoff_grows_is_jittered_and_honours_retry_after() -> None:
    delays = [backoff_seconds(n) for n in range(1, 8)]
    assert all(d >= 0.5 for d in delays)
    assert backoff_seconds(7) > backoff_seconds(1)
    assert all(backoff_seconds(20) <= 60 for _ in range(50))
    assert min(backoff_seconds(1, retry_after=5) for _ in range(50)) >= 5
    assert len({backoff_seconds(5) for _ in range(20)}) > 1


def test_an_answer_cut_mid_body_is_transient_on_every_verb(gw: Gateway, sim: KubeSim) -> None:
    # A connection reset while the answer is on its way (kubesim's RESET: half the body,
    # then the connection reset; the request itself carried out) is a transient
    # KubeError for every verb, as a connection refused is: callers catch KubeError and
    # retry, and a bare transport error escaped them.
    from kubesim.faults import RESET

    gw.apply(NS)

    def account(name: str) -> dict[str, Any]:
        meta = {"name": name, "namespace": "gw-t"}
        return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta}

    calls = {
        "list": lambda: gw.list("v1", "ServiceAccount", namespace="gw-t"),
        "get": lambda: gw._call("GET", "/api/v1/namespaces/gw-t", what="get"),
        "apply": lambda: gw.apply(account("cut")),
        "create": lambda: gw.create(account("cut2")),
        "delete": lambda: gw.delete("v1", "ServiceAccount", "cut", "gw-t"),
    }
    sim.set_faults(rate=1.0, codes=(RESET,))
    for verb, call in calls.items():
        with pytest.raises(TransientKubeError, match="cannot reach"):
            call()
        assert sim.faults.history[-1].verb == verb
    sim.clear_faults()
    # The requests were carried out: the apply and the create landed, the delete too.
    names = {a["metadata"]["name"] for a in gw.list("v1", "ServiceAccount", namespace="gw-t")}
    assert "cut2" in names and "cut" not in names


def test_a_watch_cut_mid_stream_is_transient_and_a_410_says_list_again(
    gw: Gateway, sim: KubeSim
) -> None:
    from clusters.kube.gateway import WatchExpired
    from kubesim.faults import RESET

    gw.apply(NS)
    _, version = gw.list_versioned("v1", "Namespace")
    sim.set_faults(rate=1.0, codes=(RESET,))
    with pytest.raises(TransientKubeError, match="cannot reach"):
        list(gw.watch("v1", "Namespace", resource_version=version, timeout_seconds=5))
    sim.set_faults(rate=1.0, codes=(410, 503))
    seen: set[type] = set()
    for _ in range(20):
        with pytest.raises((WatchExpired, TransientKubeError)) as caught:
            list(gw.watch("v1", "Namespace", resource_version=version, timeout_seconds=5))
        seen.add(type(caught.value))
    assert seen == {WatchExpired, TransientKubeError}
    # 410 is answered to watches only: a list never gets one.
    assert all(s.code != 410 for s in sim.faults.history if s.verb != "watch")


def test_a_pod_log_read_is_asked_again_after_a_transient_answer(gw: Gateway, sim: KubeSim) -> None:
    # A finished job's driver log is read once, before its pods go: one 503 lost it.
    gw.apply(NS)
    sim.set_faults(rate=0.0, codes=(503,), floor=1)
    assert gw.pod_log("gw-t", "gone") is None  # the 503, then the 404 of a missing pod
    assert [s.code for s in sim.faults.history if s.verb == "log"] == [503, None]
