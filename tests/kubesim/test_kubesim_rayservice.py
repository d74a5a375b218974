"""KubeRay's RayService controller in kubesim, from outside, through the official client
and the API server's service proxy: a RayService gets its RayCluster, Serve applications,
head and serve services and status; a new Serve config is applied in place; a new cluster
spec is rolled out (NewCluster: the active cluster serves until the pending one is ready;
None: nothing; incremental: traffic in steps); Serve autoscales replicas with the load that
reaches the serve service, and the Ray autoscaler adds GPU workers for them; deletion
cascades."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
import requests
from kubernetes import client
from kubesim_helpers import GPU_TOLERATION
from manual_clock import advance, clock, sim

from kubesim import KubeSim
from kubesim.clock import ManualClock

__all__ = ["clock", "sim"]

NS = "default"
G, V, P = "ray.io", "v1", "rayservices"
SERVE_CONFIG = """
applications:
  - name: hello
    import_path: hello.app
    route_prefix: /hello
    deployments:
      - name: Greeter
        num_replicas: 2
        ray_actor_options:
          num_cpus: 1
"""


def head(image: str = "rayproject/ray:2.49.2") -> dict[str, Any]:
    """A head group with the serve port, as KubeRay's samples have it."""
    return {
        "rayStartParams": {},
        "template": {
            "spec": {
                "containers": [
                    {
                        "name": "ray-head",
                        "image": image,
                        "resources": {"requests": {"cpu": "4", "memory": "8Gi"}},
                        "ports": [
                            {"containerPort": 6379, "name": "gcs-server"},
                            {"containerPort": 8265, "name": "dashboard"},
                            {"containerPort": 10001, "name": "client"},
                            {"containerPort": 8000, "name": "serve"},
                        ],
                    }
                ]
            }
        },
    }


def gpu_group(
    product: str, gpus: int, cpu: str, memory: str, replicas: int, lo: int, hi: int
) -> dict[str, Any]:
    """A worker group of ``gpus``-GPU workers on ``product`` nodes (tolerating their taint)."""
    worker = copy.deepcopy(head()["template"])
    worker["spec"]["containers"][0].update(
        name="ray-worker",
        resources={"limits": {"cpu": cpu, "memory": memory, "nvidia.com/gpu": str(gpus)}},
        ports=[],
    )
    worker["spec"]["tolerations"] = [GPU_TOLERATION]
    worker["spec"]["nodeSelector"] = {"nvidia.com/gpu.product": product}
    return {
        "groupName": "gpu",
        "replicas": replicas,
        "minReplicas": lo,
        "maxReplicas": hi,
        "rayStartParams": {},
        "template": worker,
    }


def rayservice(name: str = "svc", **spec: Any) -> dict[str, Any]:
    """A RayService with a head-only cluster."""
    body: dict[str, Any] = {
        "apiVersion": "ray.io/v1",
        "kind": "RayService",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "serveConfigV2": SERVE_CONFIG,
            "rayClusterConfig": {"rayVersion": "2.49.2", "headGroupSpec": head()},
        },
    }
    body["spec"].update(spec)
    return body


def create(custom: client.CustomObjectsApi, body: dict[str, Any]) -> dict[str, Any]:
    custom.create_namespaced_custom_object(G, V, NS, P, body)
    return get(custom, body["metadata"]["name"])


def get(custom: client.CustomObjectsApi, name: str = "svc") -> dict[str, Any]:
    found: dict[str, Any] = custom.get_namespaced_custom_object(G, V, NS, P, name)
    return found


def patch(custom: client.CustomObjectsApi, body: dict[str, Any], name: str = "svc") -> None:
    custom.patch_namespaced_custom_object(G, V, NS, P, name, body)


def cond(rs: dict[str, Any], ctype: str) -> tuple[str, str]:
    """(status, reason) of a condition."""
    for c in rs["status"]["conditions"]:
        if c["type"] == ctype:
            return c["status"], c["reason"]
    raise AssertionError(f"no condition {ctype}")


def call(
    sim: KubeSim, path: str = "/hello/world", svc: str = "svc-serve-svc:serve"
) -> requests.Response:
    """A Serve HTTP request through the API server's service proxy."""
    return requests.get(f"{sim.url}/api/v1/namespaces/{NS}/services/{svc}/proxy{path}", timeout=10)


def serve_details(sim: KubeSim, cluster: str) -> dict[str, Any]:
    """The dashboard's ``GET /api/serve/applications/`` of a RayCluster's head."""
    url = f"{sim.url}/api/v1/namespaces/{NS}/services/{cluster}-head-svc:dashboard/proxy"
    reply = requests.get(f"{url}/api/serve/applications/", timeout=10)
    assert reply.status_code == 200
    found: dict[str, Any] = reply.json()
    return found


def test_a_rayservice_becomes_ready_and_serves(
    sim: KubeSim, custom: client.CustomObjectsApi, core: client.CoreV1Api, kubectl: Any
) -> None:
    rs = create(custom, rayservice())
    st = rs["status"]
    active = st["activeServiceStatus"]["rayClusterName"]
    assert active.startswith("svc-raycluster-") and len(active) == len("svc-raycluster-") + 5
    assert st["pendingServiceStatus"] == {}
    assert cond(rs, "Ready") == ("True", "NonZeroServeEndpoints")
    assert cond(rs, "UpgradeInProgress") == ("False", "NoPendingCluster")
    assert st["serviceStatus"] == "Running" and st["numServeEndpoints"] == 1
    assert st["observedGeneration"] == 1
    app = st["activeServiceStatus"]["applicationStatuses"]["hello"]
    assert app == {
        "status": "RUNNING",
        "serveDeploymentStatuses": {"Greeter": {"status": "HEALTHY"}},
    }
    assert rs["metadata"]["finalizers"] == ["ray.io/rayservice-finalizer"]

    rc = custom.get_namespaced_custom_object(G, V, NS, "rayclusters", active)
    assert rc["metadata"]["labels"]["ray.io/originated-from-crd"] == "RayService"
    assert rc["metadata"]["ownerReferences"][0]["name"] == "svc"
    serve_svc = core.read_namespaced_service("svc-serve-svc", NS)
    assert serve_svc.spec.selector == {"ray.io/cluster": active, "ray.io/serve": "true"}
    assert [p.port for p in serve_svc.spec.ports] == [8000]
    head_svc = core.read_namespaced_service("svc-head-svc", NS)
    assert head_svc.spec.selector == {"ray.io/cluster": active, "ray.io/node-type": "head"}

    reply = call(sim)
    assert reply.status_code == 200
    body = reply.json()
    assert body["simulated"] is True and body["application"] == "hello"
    assert body["deployment"] == "Greeter" and body["rayCluster"] == active
    assert call(sim, "/nowhere").status_code == 404
    assert call(sim, "/-/routes").json() == {"/hello": "hello"}

    details = serve_details(sim, active)
    dep = details["applications"]["hello"]["deployments"]["Greeter"]
    assert dep["target_num_replicas"] == 2
    assert [r["state"] for r in dep["replicas"]] == ["RUNNING", "RUNNING"]

    out = kubectl("get", "rayservices").stdout.split("\n")
    assert out[0].split() == ["NAME", "SERVICE", "STATUS", "NUM", "SERVE", "ENDPOINTS"]
    assert out[1].split()[:3] == ["svc", "Running", "1"]


def test_a_new_serve_config_is_applied_in_place(
    sim: KubeSim, custom: client.CustomObjectsApi, core: client.CoreV1Api
) -> None:
    rs = create(custom, rayservice())
    active = rs["status"]["activeServiceStatus"]["rayClusterName"]
    patch(
        custom,
        {"spec": {"serveConfigV2": SERVE_CONFIG.replace("num_replicas: 2", "num_replicas: 3")}},
    )
    rs = get(custom)
    assert rs["status"]["activeServiceStatus"]["rayClusterName"] == active
    assert rs["status"]["pendingServiceStatus"] == {}
    assert rs["status"]["observedGeneration"] == 2
    dep = serve_details(sim, active)["applications"]["hello"]["deployments"]["Greeter"]
    assert dep["target_num_replicas"] == 3
    events = core.list_namespaced_event(NS, field_selector="involvedObject.name=svc").items
    assert sum(e.count for e in events if e.reason == "UpdatedServeApplications") == 2
    clusters = custom.list_namespaced_custom_object(G, V, NS, "rayclusters")["items"]
    assert [c["metadata"]["name"] for c in clusters] == [active]


def test_new_cluster_upgrade_serves_throughout_then_switches(
    sim: KubeSim, clock: ManualClock, custom: client.CustomObjectsApi
) -> None:
    body = rayservice(rayClusterDeletionDelaySeconds=30)
    body["metadata"]["annotations"] = {"kubesim.io/serve-deploy-seconds": "10"}
    create(custom, body)
    advance(sim, clock, 10)
    rs = get(custom)
    old = rs["status"]["activeServiceStatus"]["rayClusterName"]
    assert cond(rs, "Ready")[0] == "True"

    new_spec = copy.deepcopy(body["spec"]["rayClusterConfig"])
    new_spec["headGroupSpec"] = head("rayproject/ray:2.50.0")
    patch(custom, {"spec": {"rayClusterConfig": new_spec}})
    rs = get(custom)
    new = rs["status"]["pendingServiceStatus"]["rayClusterName"]
    assert new != old
    assert cond(rs, "UpgradeInProgress") == ("True", "BothActivePendingClustersExist")
    apps = rs["status"]["pendingServiceStatus"]["applicationStatuses"]
    assert apps["hello"]["status"] == "DEPLOYING"

    answered_by, pending_answers = [], []
    for _ in range(5):
        reply = call(sim)
        assert reply.status_code == 200
        answered_by.append(reply.json()["rayCluster"])
        pending_answers.append(call(sim, svc=f"{new}-head-svc:serve").status_code)
        advance(sim, clock, 2.5)
    # The pending cluster's own proxy has no route until Serve deployed there.
    assert pending_answers == [404] * 4 + [200]
    rs = get(custom)
    assert rs["status"]["activeServiceStatus"]["rayClusterName"] == new
    assert rs["status"]["pendingServiceStatus"] == {}
    assert cond(rs, "UpgradeInProgress") == ("False", "NoPendingCluster")
    assert answered_by[:4] == [old] * 4 and answered_by[4] == new
    assert call(sim).json()["rayCluster"] == new

    def names() -> list[str]:
        items = custom.list_namespaced_custom_object(G, V, NS, "rayclusters")["items"]
        return [c["metadata"]["name"] for c in items]

    assert sorted(names()) == sorted([old, new])
    # The switch came 10 s after the change, 2.5 s ago: the old cluster goes 30 s after it.
    advance(sim, clock, 25)
    assert old in names()
    advance(sim, clock, 3)
    assert names() == [new]


def test_upgrade_strategy_none_keeps_the_cluster(
    sim: KubeSim, custom: client.CustomObjectsApi
) -> None:
    body = rayservice(upgradeStrategy={"type": "None"})
    rs = create(custom, body)
    active = rs["status"]["activeServiceStatus"]["rayClusterName"]
    new_spec = copy.deepcopy(body["spec"]["rayClusterConfig"])
    new_spec["headGroupSpec"] = head("rayproject/ray:2.50.0")
    patch(custom, {"spec": {"rayClusterConfig": new_spec}})
    rs = get(custom)
    assert rs["status"]["activeServiceStatus"]["rayClusterName"] == active
    assert rs["status"]["pendingServiceStatus"] == {}
    clusters = custom.list_namespaced_custom_object(G, V, NS, "rayclusters")["items"]
    assert [c["metadata"]["name"] for c in clusters] == [active]
    assert clusters[0]["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["image"] == (
        "rayproject/ray:2.49.2"
    )


def test_an_invalid_spec_is_validation_failed(
    sim: KubeSim, custom: client.CustomObjectsApi
) -> None:
    body = rayservice()
    body["spec"]["rayClusterConfig"]["headGroupSpec"]["headService"] = {"metadata": {"name": "x"}}
    rs = create(custom, body)
    assert cond(rs, "Ready") == ("False", "ValidationFailed")
    assert "headService.metadata.name should not be set" in rs["status"]["conditions"][0]["message"]
    assert custom.list_namespaced_custom_object(G, V, NS, "rayclusters")["items"] == []


def incremental_body() -> dict[str, Any]:
    body = rayservice(
        upgradeStrategy={
            "type": "NewClusterWithIncrementalUpgrade",
            "clusterUpgradeOptions": {
                "gatewayClassName": "istio",
                "stepSizePercent": 25,
                "intervalSeconds": 10,
                "maxSurgePercent": 50,
            },
        }
    )
    body["spec"]["rayClusterConfig"]["enableInTreeAutoscaling"] = True
    return body


def test_incremental_upgrade_moves_traffic_in_steps(
    sim: KubeSim, clock: ManualClock, custom: client.CustomObjectsApi
) -> None:
    body = incremental_body()
    rs = create(custom, body)
    old = rs["status"]["activeServiceStatus"]["rayClusterName"]
    assert rs["status"]["activeServiceStatus"]["targetCapacity"] == 100
    new_spec = copy.deepcopy(body["spec"]["rayClusterConfig"])
    new_spec["headGroupSpec"] = head("rayproject/ray:2.50.0")
    patch(custom, {"spec": {"rayClusterConfig": new_spec}})
    seen = []
    for _ in range(12):
        rs = get(custom)
        act, pen = rs["status"]["activeServiceStatus"], rs["status"]["pendingServiceStatus"]
        if not pen:
            break
        seen.append(
            (
                act.get("targetCapacity"),
                act.get("trafficRoutedPercent"),
                pen.get("targetCapacity"),
                pen.get("trafficRoutedPercent"),
            )
        )
        assert cond(rs, "UpgradeInProgress") == ("True", "BothActivePendingClustersExist")
        advance(sim, clock, 10)
    rs = get(custom)
    assert rs["status"]["activeServiceStatus"]["rayClusterName"] != old
    assert rs["status"]["activeServiceStatus"]["targetCapacity"] == 100
    # Pending capacity grows by maxSurgePercent, traffic follows in stepSizePercent steps,
    # the active capacity shrinks once traffic caught up.
    pending_traffic = [s[3] for s in seen]
    assert pending_traffic == sorted(pending_traffic)
    assert 25 in pending_traffic and 50 in pending_traffic and 75 in pending_traffic
    assert all(s[3] <= s[2] for s in seen)
    assert all(s[1] + s[3] == 100 for s in seen)
    assert any(s[0] == 50 for s in seen)


def test_serve_autoscaling_scales_replicas_and_gpu_workers(
    sim: KubeSim, clock: ManualClock, custom: client.CustomObjectsApi, core: client.CoreV1Api
) -> None:
    config = """
applications:
  - name: model
    import_path: model.app
    route_prefix: /
    deployments:
      - name: Model
        ray_actor_options: {num_gpus: 1, num_cpus: 1}
        autoscaling_config:
          min_replicas: 1
          max_replicas: 3
          target_ongoing_requests: 1
          upscale_delay_s: 5
          downscale_delay_s: 60
          look_back_period_s: 10
"""
    body = rayservice(serveConfigV2=config)
    cfg = body["spec"]["rayClusterConfig"]
    cfg["enableInTreeAutoscaling"] = True
    cfg["headGroupSpec"]["rayStartParams"] = {"num-cpus": "0"}
    cfg["workerGroupSpecs"] = [gpu_group("NVIDIA-L4", 1, "4", "16Gi", 0, 0, 4)]
    create(custom, body)

    def gpu_workers() -> int:
        pods = core.list_namespaced_pod(NS, label_selector="ray.io/group=gpu").items
        return sum(1 for p in pods if p.status.phase == "Running")

    advance(sim, clock, 5)  # the Ray autoscaler's pass adds a worker for the replica
    advance(sim, clock, 1)
    rs = get(custom)
    assert gpu_workers() == 1
    assert cond(rs, "Ready")[0] == "True"
    cluster = rs["status"]["activeServiceStatus"]["rayClusterName"]

    def replicas() -> int:
        dep = serve_details(sim, cluster)["applications"]["model"]["deployments"]["Model"]
        return int(dep["target_num_replicas"])

    # 30 requests in 10 s: 3 ongoing on average, 1 wanted per replica.
    for _ in range(10):
        for _ in range(3):
            assert call(sim, "/predict").status_code == 200
        advance(sim, clock, 0.9)
    assert replicas() == 3
    for _ in range(4):
        advance(sim, clock, 5)
    assert gpu_workers() == 3
    rs = get(custom)
    assert (
        rs["status"]["activeServiceStatus"]["applicationStatuses"]["model"]["status"] == "RUNNING"
    )
    # No more load: back to min_replicas after downscale_delay_s, idle workers go.
    for _ in range(30):
        advance(sim, clock, 5)
    assert replicas() == 1
    assert gpu_workers() == 1


def test_deleting_a_rayservice_cascades(
    sim: KubeSim, custom: client.CustomObjectsApi, core: client.CoreV1Api
) -> None:
    create(custom, rayservice())
    assert core.list_namespaced_pod(NS).items
    custom.delete_namespaced_custom_object(G, V, NS, P, "svc")
    assert custom.list_namespaced_custom_object(G, V, NS, P)["items"] == []
    assert custom.list_namespaced_custom_object(G, V, NS, "rayclusters")["items"] == []
    assert core.list_namespaced_pod(NS).items == []
    names = [s.metadata.name for s in core.list_namespaced_service(NS).items]
    assert "svc-serve-svc" not in names and "svc-head-svc" not in names


@pytest.mark.parametrize("exclude", [True, False])
def test_exclude_head_pod_from_serve_service(
    sim: KubeSim, custom: client.CustomObjectsApi, exclude: bool
) -> None:
    rs = create(custom, rayservice(excludeHeadPodFromServeSvc=exclude))
    if exclude:
        assert cond(rs, "Ready") == ("False", "Initializing")
        assert json.loads(call(sim).text)["code"] == 503
    else:
        assert cond(rs, "Ready") == ("True", "NonZeroServeEndpoints")


def test_the_dashboards_serve_api_on_a_plain_raycluster(
    sim: KubeSim, clock: ManualClock, custom: client.CustomObjectsApi
) -> None:
    body = {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": "rc", "namespace": NS},
        "spec": {"headGroupSpec": head()},
    }
    custom.create_namespaced_custom_object(G, V, NS, "rayclusters", body)
    url = f"{sim.url}/api/v1/namespaces/{NS}/services/rc-head-svc:dashboard/proxy"
    assert requests.get(f"{url}/api/serve/applications/", timeout=10).json()["applications"] == {}
    bad = requests.put(f"{url}/api/serve/applications/", json={"apps": []}, timeout=10)
    assert bad.status_code == 400 and "applications" in bad.text
    config = {
        "applications": [
            {
                "name": "echo",
                "import_path": "echo:app",
                "route_prefix": "/",
                "deployments": [
                    {
                        "name": "Echo",
                        "autoscaling_config": {
                            "min_replicas": 1,
                            "max_replicas": 3,
                            "target_ongoing_requests": 2,
                            "upscale_delay_s": 0,
                        },
                    }
                ],
            }
        ]
    }
    assert requests.put(f"{url}/api/serve/applications/", json=config, timeout=10).ok
    app = serve_details(sim, "rc")["applications"]["echo"]
    assert app["status"] == "RUNNING" and app["deployments"]["Echo"]["target_num_replicas"] == 1
    # The simulator's load knob: 5 ongoing requests at 2 a replica want 3 replicas.
    custom.patch_namespaced_custom_object(
        G,
        V,
        NS,
        "rayclusters",
        "rc",
        {"metadata": {"annotations": {"kubesim.io/serve-load": json.dumps({"Echo": 5})}}},
    )
    advance(sim, clock, 1)
    assert (
        serve_details(sim, "rc")["applications"]["echo"]["deployments"]["Echo"][
            "target_num_replicas"
        ]
        == 3
    )
    assert requests.delete(f"{url}/api/serve/applications/", timeout=10).ok
    assert serve_details(sim, "rc")["applications"] == {}


def test_serve_answers_as_ray_until_its_applications_run(
    sim: KubeSim, clock: ManualClock, custom: client.CustomObjectsApi, core: client.CoreV1Api
) -> None:
    body = rayservice()
    body["metadata"]["annotations"] = {"kubesim.io/serve-deploy-seconds": "10"}
    rs = create(custom, body)
    pending = rs["status"]["pendingServiceStatus"]["rayClusterName"]
    assert rs["status"]["pendingServiceStatus"]["applicationStatuses"]["hello"] == {
        "status": "DEPLOYING",
        "message": "Deploying app. Waiting for deployments to become HEALTHY.",
        "serveDeploymentStatuses": {"Greeter": {"status": "UPDATING"}},
    }
    proxied = f"{pending}-head-svc:serve"
    # Ray 2.49's proxy before the route table is published: 404 for a path, 503 for
    # health and routes (so KubeRay leaves the head out of the serve service).
    reply = call(sim, svc=proxied)
    assert reply.status_code == 404
    assert reply.text == (
        "Path '/hello/world' not found. Ping http://.../-/routes for available routes."
    )
    assert reply.headers["Content-Type"] == "text/plain; charset=utf-8"
    assert len(reply.headers["X-Request-ID"]) == 36
    for path in ("/-/healthz", "/-/routes"):
        reply = call(sim, path, svc=proxied)
        assert (reply.status_code, reply.text) == (503, "Route table is not populated yet.")
    head_pod = core.list_namespaced_pod(NS, label_selector=f"ray.io/cluster={pending}").items[0]
    assert head_pod.metadata.labels["ray.io/serve"] == "false"
    with pytest.raises(client.ApiException):
        core.read_namespaced_service("svc-serve-svc", NS)

    advance(sim, clock, 9)
    assert call(sim, svc=proxied).status_code == 404
    advance(sim, clock, 1)
    rs = get(custom)
    assert rs["status"]["activeServiceStatus"]["rayClusterName"] == pending
    assert rs["status"]["activeServiceStatus"]["applicationStatuses"]["hello"]["status"] == (
        "RUNNING"
    )
    reply = call(sim)
    assert reply.status_code == 200 and reply.json()["rayCluster"] == pending
    assert (call(sim, "/-/healthz").status_code, call(sim, "/-/healthz").text) == (200, "success")
    routes = call(sim, "/-/routes")
    assert routes.headers["Content-Type"] == "application/json"
    assert routes.text == '{"/hello":"hello"}'
    head_pod = core.list_namespaced_pod(NS, label_selector=f"ray.io/cluster={pending}").items[0]
    assert head_pod.metadata.labels["ray.io/serve"] == "true"

    # An in-place update keeps the route: its replicas serve while it deploys again.
    patch(
        custom,
        {"spec": {"serveConfigV2": SERVE_CONFIG.replace("num_replicas: 2", "num_replicas: 3")}},
    )
    rs = get(custom)
    assert rs["status"]["activeServiceStatus"]["applicationStatuses"]["hello"]["status"] == (
        "DEPLOYING"
    )
    assert call(sim).status_code == 200
