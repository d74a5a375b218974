"""Ray Serve's HTTP faces on a simulated head: the dashboard's Serve REST API (port 8265,
reached through ``raydashboard.py``, routes as Ray's ``serve_head.py``) and the Serve proxy
(port 8000) behind the serve service, in Ray's wire format so that KubeRay and clients see
what a real head answers. kubesim/README.md (*Ray Serve (simulated)*) lists the routes and
their answers.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

from kubesim.store import Obj
from kubesim.util import get_path

if TYPE_CHECKING:
    from kubesim.controller import ClusterView

# An answer: (status, content type, body); the dashboard and the proxy wrap it in their
# ``Reply`` (this module stays below ``raydashboard``, which routes to it).
Reply = tuple[int, str, bytes]

SERVE_PORT = 8000
JSON = "application/json; charset=utf-8"
TEXT = "text/plain; charset=utf-8"


def _reply(status: int, body: Any, content_type: str = JSON) -> Reply:
    data = json.dumps(body) if content_type == JSON else str(body)
    return status, content_type, data.encode()


def _node_id(pod_name: str) -> str:
    return hashlib.sha224(pod_name.encode()).hexdigest()


def serve_api(
    cluster: ClusterView, ns: str, name: str, method: str, body: bytes, notify: bool = True
) -> Reply:
    """``/api/serve/applications/`` of the head of RayCluster ``ns/name``; ``notify``: tell
    the RayService controller (not when it is the caller)."""
    from kubesim.operators.rayserve import parse_config

    serve = cluster.rayserve
    if method == "PUT":
        try:
            doc = json.loads(body or b"null")
        except ValueError as exc:
            return _reply(400, f"Invalid JSON: {exc}", TEXT)
        inst, why = parse_config(doc)
        if inst is None:
            return _reply(400, f"1 validation error for ServeDeploySchema\n{why}", TEXT)
        serve.deploy(ns, name, inst)
        if notify:
            cluster.rayservice.serve_changed(ns, name)
        return _reply(200, "", TEXT)
    if method == "DELETE":
        serve.shutdown(ns, name)
        if notify:
            cluster.rayservice.serve_changed(ns, name)
        return _reply(200, "", TEXT)
    return _reply(200, details(cluster, ns, name))


def details(cluster: ClusterView, ns: str, name: str) -> dict[str, Any]:
    """``ServeInstanceDetails`` of one head."""
    serve = cluster.rayserve
    inst = serve.instances.get((ns, name))
    nodes = serve.nodes(ns, name)
    ips = {}
    for pod_name, _ in nodes:
        pod = cluster.store.get("pods", ns, pod_name)
        ips[pod_name] = get_path(pod, "status", "podIP", default="")
    out: dict[str, Any] = {
        "controller_info": {},
        "proxy_location": "EveryNode",
        "http_options": {"host": "0.0.0.0", "port": SERVE_PORT},
        "grpc_options": {"port": 9000, "grpc_servicer_functions": []},
        "proxies": {},
        "deploy_mode": "MULTI_APP",
        "applications": {},
        "target_capacity": None,
    }
    if inst is None:
        return out
    out["proxy_location"] = inst.proxy_location
    out["http_options"] = {**out["http_options"], **inst.http_options}
    out["target_capacity"] = inst.target_capacity
    out["controller_info"] = {"node_id": _node_id(nodes[0][0]) if nodes else ""}
    for pod_name, _ in nodes:
        out["proxies"][_node_id(pod_name)] = {
            "node_id": _node_id(pod_name),
            "node_ip": ips[pod_name],
            "actor_name": f"SERVE_CONTROLLER_ACTOR:SERVE_PROXY_ACTOR-{_node_id(pod_name)}",
            "status": "HEALTHY",
        }
    statuses = serve.statuses(ns, name) or {}
    for app in inst.apps.values():
        st = statuses.get(app.name, {})
        deps = {}
        for dep in app.deployments.values():
            dst = st.get("deployments", {}).get(dep.name, {})
            deps[dep.name] = {
                "name": dep.name,
                "status": dst.get("status", "UPDATING"),
                "status_trigger": "CONFIG_UPDATE_COMPLETED"
                if dst.get("status") == "HEALTHY"
                else "CONFIG_UPDATE_STARTED",
                "message": dst.get("message", ""),
                "deployment_config": {k: v for k, v in dep.config.items() if k not in ("name",)},
                "target_num_replicas": dep.target,
                "required_resources": dict(dep.actor),
                "replicas": [
                    {
                        "replica_id": r.replica_id,
                        "state": "RUNNING" if r.node else "PENDING_ALLOCATION",
                        "node_id": _node_id(r.node) if r.node else None,
                        "node_ip": ips.get(r.node or ""),
                        "actor_name": f"SERVE_REPLICA::{app.name}#{dep.name}#{r.replica_id}",
                        "start_time_s": r.started,
                    }
                    for r in dep.replicas
                ],
            }
        out["applications"][app.name] = {
            "name": app.name,
            "route_prefix": app.route_prefix,
            "docs_path": None,
            "status": st.get("status", "DEPLOYING"),
            "message": st.get("message", ""),
            "last_deployed_time_s": app.deployed_at,
            "deployed_app_config": app.config,
            "source": "DECLARATIVE",
            "deployments": deps,
        }
    return out


def proxy(cluster: ClusterView, pod: Obj, method: str, path: str, body: bytes) -> Reply | None:
    """What the Serve proxy on ``pod`` answers; None when Serve does not run there."""
    labels = pod["metadata"].get("labels") or {}
    ns, name = pod["metadata"]["namespace"], labels.get("ray.io/cluster", "")
    serve = cluster.rayserve
    inst = serve.instances.get((ns, name))
    if inst is None or pod["metadata"]["name"] not in dict(serve.nodes(ns, name)):
        return None
    if path == "/-/healthz":
        return _reply(200, "success", TEXT)
    if path == "/-/routes":
        return _reply(200, {a.route_prefix: a.name for a in inst.apps.values()})
    app = serve.route(ns, name, path)
    if app is None:
        return _reply(
            404,
            f"Path '{path}' not found. Ping http://.../-/routes for available routes.",
            TEXT,
        )
    ingress = list(app.deployments.values())[-1]
    running = [r for r in ingress.replicas if r.node]
    if not running:
        return _reply(503, "Service Unavailable", TEXT)
    serve.record_request(ns, name, app)
    replica = running[len(app.requests) % len(running)]
    return _reply(
        200,
        {
            "simulated": True,
            "application": app.name,
            "deployment": ingress.name,
            "replica": f"{app.name}#{ingress.name}#{replica.replica_id}",
            "node": replica.node,
            "rayCluster": name,
            "method": method,
            "path": path,
            "bytes": len(body),
        },
    )
