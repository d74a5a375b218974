"""Restart with and without state on the same port, and JSON snapshots."""

from __future__ import annotations

import json
from pathlib import Path

from kubernetes import client
from kubesim_helpers import apply, get_rc, raycluster

from kubesim import KubeSim


def test_restart_keeps_or_wipes_state(
    sim: KubeSim, core: client.CoreV1Api, custom: client.CustomObjectsApi
) -> None:
    apply(custom, raycluster("keep", workers=1))
    port = sim.port
    sim.restart(keep_state=True)
    assert sim.port == port
    assert get_rc(custom, "keep")["status"]["state"] == "ready"
    assert len(core.list_namespaced_pod("default").items) == 2
    sim.restart(keep_state=False)
    assert sim.port == port
    assert not custom.list_cluster_custom_object("ray.io", "v1", "rayclusters")["items"]
    assert not core.list_pod_for_all_namespaces().items
    assert len(core.list_node().items) == 11
    apply(custom, raycluster("again", workers=1))
    assert get_rc(custom, "again")["status"]["state"] == "ready"


def test_snapshot_round_trip(tmp_path: Path) -> None:
    snap = tmp_path / "state.json"
    first = KubeSim(snapshot_path=str(snap)).start()
    try:
        cfg = client.Configuration()
        cfg.host = first.url
        custom = client.CustomObjectsApi(client.ApiClient(cfg))
        core = client.CoreV1Api(client.ApiClient(cfg))
        apply(custom, raycluster("snap", workers=2))
        core.create_namespace({"metadata": {"name": "t"}})
        core.create_namespaced_resource_quota(
            "t", {"metadata": {"name": "q"}, "spec": {"hard": {"requests.nvidia.com/gpu": "8"}}}
        )
        rv = first.store.rv
    finally:
        first.stop()
    data = json.loads(snap.read_text())
    assert data["resourceVersion"] >= rv
    second = KubeSim(snapshot_path=str(snap)).start()
    try:
        rc = second.get("rayclusters.ray.io", "default", "snap")
        assert rc is not None and rc["status"]["state"] == "ready"
        assert second.store.rv >= rv
        # the scheduler rebuilt its node usage: the two workers still hold their GPUs
        pods = [
            p
            for p in second.list("pods", "default")
            if p["metadata"]["labels"]["ray.io/node-type"] == "worker"
        ]
        node = pods[0]["spec"]["nodeName"]
        assert second.cluster.scheduler.nodes[node].used["nvidia.com/gpu"] == 2
        assert second.get("resourcequotas", "t", "q")["status"]["used"] == {
            "requests.nvidia.com/gpu": "0"
        }
    finally:
        second.stop()
