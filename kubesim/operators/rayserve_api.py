"""Ray Serve's HTTP faces on a simulated head: the dashboard's Serve REST API (port 8265,
reached through ``raydashboard.py``, routes as Ray's ``serve_head.py``) and the Serve proxy
(port 8000) behind the serve service, in Ray's wire format so that KubeRay and clients see
what a real head answers. kubesim/README.md (*Ray Serve (simulated)*) lists the routes and
their answers.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import TYPE_CHECKING, Any

from kubesim.store import Obj
from kubesim.util import get_path

if TYPE_CHECKING:
    from kubesim.controller import ClusterView
    from kubesim.operators.rayserve import Application, Deployment

# An answer: (status, content type, body); the dashboard and the proxy wrap it in their
# ``Reply`` (this module stays below ``raydashboard``, which routes to it).
Reply = tuple[int, str, bytes]
# The proxy's answer also has headers.
ProxyReply = tuple[int, str, bytes, dict[str, str]]

SERVE_PORT = 8000
JSON = "application/json; charset=utf-8"
TEXT = "text/plain; charset=utf-8"
# Ray 2.49: proxy_router.py:11-12 and serve/_private/constants.py:466.
NO_ROUTES_MESSAGE = "Route table is not populated yet."
NO_REPLICAS_MESSAGE = "No replicas are available yet."
HEALTHY_MESSAGE = "success"


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


def proxy(cluster: ClusterView, pod: Obj, method: str, path: str, body: bytes) -> ProxyReply | None:
    """What the Serve proxy on ``pod`` answers (Ray 2.49's ``HTTPProxy``); None when Serve
    does not run there."""
    labels = pod["metadata"].get("labels") or {}
    ns, name = pod["metadata"]["namespace"], labels.get("ray.io/cluster", "")
    serve = cluster.rayserve
    inst = serve.instances.get((ns, name))
    if inst is None or pod["metadata"]["name"] not in dict(serve.nodes(ns, name)):
        return None
    now = cluster.clock.time()
    routed = [a for a in inst.apps.values() if a.is_routed(now)]
    if path in ("/-/healthz", "/-/routes"):
        # proxy_router.py:44-73 (ready_for_traffic): no route table yet, or a worker's
        # proxy whose handles have no running replica, is not ready; proxy.py:301-330 and
        # 747-790 answer 503 with the message for both, else 200.
        why = ""
        if not inst.populated(now):
            why = NO_ROUTES_MESSAGE
        elif labels.get("ray.io/node-type") != "head" and not any(
            r.node for a in routed for r in _ingress(a).replicas
        ):
            why = NO_REPLICAS_MESSAGE
        if why:
            return _ray_reply(503, why)
        if path == "/-/healthz":
            return _ray_reply(200, HEALTHY_MESSAGE)
        return _ray_reply(200, {a.route_prefix: a.name for a in routed})
    app = serve.route(ns, name, path)
    if app is None:
        # proxy.py:734-745 (not_found_response): also while the application is still being
        # built, as Ray publishes its route only then (application_state.py:441-454).
        return _ray_reply(
            404, f"Path '{path}' not found. Ping http://.../-/routes for available routes."
        )
    ingress = _ingress(app)
    running = [r for r in ingress.replicas if r.node]
    if not running:
        # Ray holds the request until a replica runs (router.py:748-751), or answers 408
        # once ``request_timeout_s`` passed (http_util.py:747-752); kubesim cannot hold.
        timeout = inst.http_options.get("request_timeout_s")
        if timeout:
            rid = str(uuid.uuid4())
            return _ray_reply(408, f"Request {rid} timed out after {timeout}s.", rid)
        return _ray_reply(503, "Service Unavailable")
    serve.record_request(ns, name, app)
    replica = running[len(app.requests) % len(running)]
    return _ray_reply(
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


def _ingress(app: Application) -> Deployment:
    return list(app.deployments.values())[-1]


def _ray_reply(status: int, obj: Any, request_id: str = "") -> ProxyReply:
    """``convert_object_to_asgi_messages`` (http_util.py:97-133): a str as
    ``text/plain; charset=utf-8``, else compact JSON as ``application/json``; every answer
    carries ``X-Request-ID`` (``RequestIdMiddleware``, http_util.py:645-665)."""
    headers = {"X-Request-ID": request_id or str(uuid.uuid4())}
    if isinstance(obj, str):
        return status, TEXT, obj.encode(), headers
    return status, "application/json", json.dumps(obj, separators=(",", ":")).encode(), headers
