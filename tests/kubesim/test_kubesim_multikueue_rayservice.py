"""MultiKueue's RayService adapter (Kueue v0.19.2) across three kubesims over loopback
HTTP, set up as ``test_kubesim_multikueue`` sets up its fleet: Kueue's webhook gives a
queued RayService ``spec.managedBy: kueue.x-k8s.io/multikueue`` so the manager's KubeRay
leaves it alone; its Workload is dispatched and the RayService runs on the worker that
admits it, its status copied back; a new ``serveConfigV2`` on the manager reaches the
worker's copy (the MultiKueueRemoteSpecSync gate, on by default) and nothing else of the
spec does; KubeRay's CRD keeps ``managedBy`` to its two values, immutable; deleting the
manager's RayService deletes the copies."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException
from test_kubesim_multikueue import (
    NS,
    Kubectl,
    api_for,
    check_state,
    connect,
    get,
    make_kubectl,
    setup_queues,
    wait_for,
    workloads,
)
from test_kubesim_rayservice import gpu_group, rayservice

from kubesim import KubeSim

RAY = ("ray.io", "v1")
L4 = "NVIDIA-L4"
NEW_CONFIG = """
applications:
  - name: goodbye
    import_path: goodbye.app
    route_prefix: /goodbye
    deployments:
      - name: Farewell
        num_replicas: 1
        ray_actor_options:
          num_cpus: 1
"""


def queued_service(name: str, **spec: Any) -> dict[str, Any]:
    """A RayService of one 1-GPU L4 worker in LocalQueue ``lq`` (the flavor's labels
    place its pods)."""
    body = rayservice(name, **spec)
    body["metadata"].update(namespace=NS, labels={"kueue.x-k8s.io/queue-name": "lq"})
    group = gpu_group(L4, 1, "4", "16Gi", 1, 1, 1)
    group["template"]["spec"].pop("nodeSelector")
    body["spec"]["rayClusterConfig"]["workerGroupSpecs"] = [group]
    return body


def create(sim: KubeSim, body: dict[str, Any]) -> None:
    api = api_for(sim)
    try:
        client.CustomObjectsApi(api).create_namespaced_custom_object(*RAY, NS, "rayservices", body)
    finally:
        api.close()


def patch(sim: KubeSim, name: str, body: dict[str, Any]) -> None:
    api = api_for(sim)
    try:
        client.CustomObjectsApi(api).patch_namespaced_custom_object(
            *RAY, NS, "rayservices", name, body
        )
    finally:
        api.close()


def ready(rs: dict[str, Any] | None) -> bool:
    conditions = ((rs or {}).get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def apps(rs: dict[str, Any] | None) -> set[str]:
    active = ((rs or {}).get("status") or {}).get("activeServiceStatus") or {}
    return set(active.get("applicationStatuses") or {})


def image(rs: dict[str, Any]) -> str:
    head = rs["spec"]["rayClusterConfig"]["headGroupSpec"]["template"]["spec"]
    return str(head["containers"][0]["image"])


def start(gates: dict[str, bool] | None = None) -> tuple[KubeSim, KubeSim, KubeSim]:
    manager = KubeSim(
        kueue=True,
        kueue_feature_gates=gates,
        multikueue={"workerLostTimeout": "5s", "gcInterval": "1s"},
    )
    return manager.start(), KubeSim(kueue=True).start(), KubeSim(kueue=True).start()


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[tuple[KubeSim, KubeSim, KubeSim, Kubectl]]:
    """A manager and two workers, connected: worker1 has no room, worker2 four L4s."""
    manager, w1, w2 = start()
    try:
        kubectl = make_kubectl(manager, tmp_path)
        setup_queues(manager, gpus=4, check="mk")
        setup_queues(w1, gpus=0)
        setup_queues(w2, gpus=4)
        connect(manager, {"worker1": w1, "worker2": w2}, kubectl, tmp_path)
        yield manager, w1, w2, kubectl
    finally:
        for s in (manager, w1, w2):
            s.stop()


def dispatched(manager: KubeSim, owner: str) -> dict[str, Any]:
    """The manager's Workload of RayService ``owner`` once its check is Ready."""
    found: dict[str, Any] = wait_for(
        f"{owner} dispatched",
        lambda: next(
            (
                w
                for w in workloads(manager)
                if w["metadata"]["ownerReferences"][0]["name"] == owner
                and check_state(w)[0] == "Ready"
            ),
            None,
        ),
        timeout=60,
    )
    return found


def test_a_rayservice_runs_on_the_worker_that_admits_it(
    fleet: tuple[KubeSim, KubeSim, KubeSim, Kubectl],
) -> None:
    manager, w1, w2, kubectl = fleet
    create(manager, queued_service("svc"))
    local = get(manager, "rayservices", "svc", RAY)
    assert local["spec"]["managedBy"] == "kueue.x-k8s.io/multikueue"  # Kueue's webhook
    assert not (local["metadata"].get("finalizers") or [])  # KubeRay left it alone

    wl = dispatched(manager, "svc")
    wl_name = wl["metadata"]["name"]
    assert wl["metadata"]["ownerReferences"][0]["kind"] == "RayService"
    assert check_state(wl) == ("Ready", 'The workload was admitted on "worker2"')
    assert wl["status"]["clusterName"] == "worker2"
    copy = wait_for("the copy on worker2", lambda: get(w2, "rayservices", "svc", RAY))
    assert "managedBy" not in copy["spec"]
    labels = copy["metadata"]["labels"]
    assert labels["kueue.x-k8s.io/prebuilt-workload-name"] == wl_name
    assert labels["kueue.x-k8s.io/multikueue-origin"] == "multikueue"
    assert get(w1, "rayservices", "svc", RAY) is None
    wait_for("worker1's Workload copy gone", lambda: get(w1, "workloads", wl_name) is None)

    # KubeRay runs it on worker2; its status comes back to the manager's.
    wait_for("ready on worker2", lambda: ready(get(w2, "rayservices", "svc", RAY)), timeout=60)
    wait_for("synced back", lambda: ready(get(manager, "rayservices", "svc", RAY)), timeout=60)
    assert apps(get(manager, "rayservices", "svc", RAY)) == {"hello"}
    with manager.cluster.lock:
        assert manager.store.count("pods") == 0
        assert manager.store.count("rayclusters.ray.io") == 0
    with w2.cluster.lock:
        assert w2.store.count("rayclusters.ray.io") == 1

    # A new Serve config on the manager is forwarded; KubeRay there updates in place.
    patch(manager, "svc", {"spec": {"serveConfigV2": NEW_CONFIG}})
    wait_for(
        "serveConfigV2 forwarded",
        lambda: get(w2, "rayservices", "svc", RAY)["spec"]["serveConfigV2"] == NEW_CONFIG,
    )
    wait_for(
        "the new application reported back",
        lambda: apps(get(manager, "rayservices", "svc", RAY)) == {"goodbye"},
        timeout=60,
    )
    # The cluster's spec is not forwarded: the copy keeps what it was created with.
    before = image(get(w2, "rayservices", "svc", RAY))
    changed = get(manager, "rayservices", "svc", RAY)
    head = changed["spec"]["rayClusterConfig"]["headGroupSpec"]
    head["template"]["spec"]["containers"][0]["image"] = "rayproject/ray:2.50.0"
    patch(manager, "svc", {"spec": {"rayClusterConfig": {"headGroupSpec": head}}})
    patch(manager, "svc", {"spec": {"serveConfigV2": NEW_CONFIG + "\n"}})  # a sync runs
    wait_for(
        "the second config forwarded",
        lambda: get(w2, "rayservices", "svc", RAY)["spec"]["serveConfigV2"] == NEW_CONFIG + "\n",
    )
    assert image(get(w2, "rayservices", "svc", RAY)) == before != "rayproject/ray:2.50.0"

    # KubeRay's CRD: managedBy is immutable, and one of its two values.
    with pytest.raises(ApiException) as refused:
        patch(manager, "svc", {"spec": {"managedBy": "ray.io/kuberay-operator"}})
    assert refused.value.status == 422
    assert "the managedBy field is immutable" in refused.value.body
    with pytest.raises(ApiException) as refused:
        create(manager, queued_service("odd", managedBy="example.com/mine"))
    assert refused.value.status == 422
    assert "the managedBy field value must be either" in refused.value.body

    # Deleting the manager's RayService deletes the worker's copies.
    kubectl("delete", "rayservice", "svc", "-n", NS)
    wait_for("the copy deleted", lambda: get(w2, "rayservices", "svc", RAY) is None)
    wait_for("the Workload copy deleted", lambda: get(w2, "workloads", wl_name) is None)
    wait_for("its Ray cluster gone", lambda: w2.store.count("rayclusters.ray.io") == 0)


def test_without_the_remote_spec_sync_gate_a_new_serve_config_stays_on_the_manager(
    tmp_path: Path,
) -> None:
    manager, w1, w2 = start({"MultiKueueRemoteSpecSync": False})
    try:
        kubectl = make_kubectl(manager, tmp_path)
        setup_queues(manager, gpus=4, check="mk")
        setup_queues(w1, gpus=4)
        setup_queues(w2, gpus=0)
        connect(manager, {"worker1": w1, "worker2": w2}, kubectl, tmp_path)
        create(manager, queued_service("svc"))
        dispatched(manager, "svc")
        wait_for("ready on worker1", lambda: ready(get(w1, "rayservices", "svc", RAY)), timeout=60)
        patch(manager, "svc", {"spec": {"serveConfigV2": NEW_CONFIG}})
        # A RayService created after the patch is dispatched: the pass that did so read
        # the patched one too, and forwarded nothing.
        create(manager, queued_service("later"))
        dispatched(manager, "later")
        wait_for("later's copy", lambda: get(w1, "rayservices", "later", RAY))
        assert get(w1, "rayservices", "svc", RAY)["spec"]["serveConfigV2"] != NEW_CONFIG
    finally:
        for s in (manager, w1, w2):
            s.stop()
