"""The API server's service proxy:
``/api/v1/namespaces/{ns}/services/{[scheme:]name[:port]}/proxy[/{path}]`` (any method).

The service is resolved as kube-apiserver's ``ResourceLocation`` does it, with its refusals;
kubesim has no endpoints controller, so the endpoints are computed here as that controller
would. Upgrades are carried as the API server's ``UpgradeAwareHandler`` carries them. A port a
real process serves (``localproc.py``) is relayed to it (``localrelay.py``); otherwise only the
simulated Ray dashboard and Serve proxy answer, and other ports fail as Go's transport would.
:class:`ProxyLog` keeps the last proxied requests; kubesim/README.md (*Service proxy*).
"""

from __future__ import annotations

import re
import threading
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from kubesim import errors
from kubesim.errors import ApiError
from kubesim.operators import rayserve_api
from kubesim.operators.raydashboard import Dashboard, Reply, ray_ports
from kubesim.store import Obj
from kubesim.util import get_path

if TYPE_CHECKING:
    from kubesim.cluster import Cluster

PATH = re.compile(r"^/api/v1/namespaces/([^/]+)/services/([^/]+)/proxy(/.*)?$")
PROXY_LOG_SIZE = 200
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)
# The first frame a gRPC (HTTP/2) server writes: an empty SETTINGS frame, as Go quotes it.
_HTTP2_SETTINGS = r"\x00\x00\x06\x04\x00\x00\x00\x00\x00\x00\x05\x00\x00@\x00"


@dataclass
class ProxyPath:
    """A request on a service proxy path."""

    namespace: str
    service_id: str  # name, name:port or scheme:name:port, decoded
    path: str | None  # the backend's path, decoded; None for ``.../proxy`` alone
    raw_path: str = "/"  # the backend's path as sent (still percent-encoded)


def match(raw_path: str) -> ProxyPath | None:
    """The proxy request in a raw (still percent-encoded) request path, else None."""
    found = PATH.match(raw_path)
    if found is None:
        return None
    rest = found.group(3)
    return ProxyPath(
        unquote(found.group(1)),
        unquote(found.group(2)),
        unquote(rest) if rest else None,
        rest or "/",
    )


@dataclass
class Target:
    """Where the API server would send the request: a pod's port."""

    pod: Obj
    port: int
    scheme: str


def _split_id(service_id: str) -> tuple[str, str, str]:
    """Go's ``utilnet.SplitSchemeNamePort``: (scheme, name, port); 400 if malformed."""
    parts = service_id.split(":")
    if len(parts) == 1:
        scheme, name, port = "", parts[0], ""
    elif len(parts) == 2:
        scheme, name, port = "", parts[0], parts[1]
    elif len(parts) == 3 and parts[0] in ("http", "https"):
        scheme, name, port = parts
    else:
        scheme, name, port = "", "", ""
    if not name:
        raise errors.bad_request(f'invalid service request "{service_id}"')
    return scheme or "http", name, port


def _endpoint_port(svc_port: dict[str, Any], pod: Obj) -> int | None:
    """The port a service port reaches on a pod (a named target port is looked up in the
    pod's container ports, as the endpoints controller does)."""
    target = svc_port.get("targetPort", svc_port.get("port"))
    if isinstance(target, int) or str(target).isdigit():
        return int(str(target))
    for c in get_path(pod, "spec", "containers", default=[]):
        for p in c.get("ports") or []:
            if p.get("name") == target and p.get("containerPort"):
                return int(p["containerPort"])
    return None


def _is_ready(pod: Obj) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in get_path(pod, "status", "conditions", default=[])
    )


def _backing_pods(cluster: Cluster, svc: Obj) -> list[Obj]:
    """The pods in the service's endpoints (ready or not), as the endpoints controller
    picks them: selected, Pending or Running with an IP, not terminating."""
    selector = svc["spec"].get("selector") or {}
    if not selector:
        return []
    out = []
    for pod in cluster.store.iter("pods", svc["metadata"]["namespace"]):
        labels = pod["metadata"].get("labels") or {}
        if (
            all(labels.get(k) == v for k, v in selector.items())
            and get_path(pod, "status", "phase") in ("Pending", "Running")
            and get_path(pod, "status", "podIP")
            and not pod["metadata"].get("deletionTimestamp")
        ):
            out.append(pod)
    return out


def resolve(cluster: Cluster, ns: str, service_id: str) -> Target:
    """kube-apiserver's ``ResourceLocation`` for a service (see the module docstring)."""
    scheme, name, port = _split_id(service_id)
    svc = cluster.store.get("services", ns, name)
    if port.isdigit():
        if svc is None:
            raise errors.not_found("services", "", name)
        by_number = [p for p in svc["spec"].get("ports") or [] if p.get("port") == int(port)]
        if not by_number:
            raise ApiError(
                503,
                "ServiceUnavailable",
                f'no service port {int(port)} found for service "{name}"',
            )
        port = str(by_number[0].get("name") or "")
    if svc is None:
        raise errors.not_found("endpoints", "", name)
    pods = _backing_pods(cluster, svc)
    if not pods:
        raise ApiError(503, "ServiceUnavailable", f'no endpoints available for service "{name}"')
    for svc_port in svc["spec"].get("ports") or []:
        if str(svc_port.get("name") or "") != port:
            continue
        for pod in sorted(pods, key=lambda p: p["metadata"]["name"]):
            target = _endpoint_port(svc_port, pod)
            if _is_ready(pod) and target is not None:
                return Target(pod, target, scheme)
    raise ApiError(503, "ServiceUnavailable", f'no endpoints available for service "{service_id}"')


def _unreachable(reason: str) -> ApiError:
    return ApiError(503, "ServiceUnavailable", f"error trying to reach service: {reason}")


def local_address(cluster: Cluster, target: Target) -> tuple[str, int] | None:
    """The loopback address of a real process serving the target's port (``localproc``),
    which ``server.py`` relays the connection to (``localrelay.py``); else None."""
    meta = target.pod["metadata"]
    if target.scheme == "https":
        return None
    return cluster.localprocs.address(meta["namespace"], meta["name"], target.port)


def forward(
    cluster: Cluster, target: Target, method: str, path: str, body: bytes, *, upgrade: bool = False
) -> Reply:
    """What the pod's port answers (see the module docstring); refusals as ApiError.
    ``upgrade``: the request asks for a WebSocket, which the API server carries through."""
    pod = target.pod
    ip = get_path(pod, "status", "podIP", default="")
    labels = pod["metadata"].get("labels") or {}
    if labels.get("ray.io/node-type") == "head":
        rc = cluster.store.get(
            "rayclusters.ray.io", pod["metadata"]["namespace"], labels.get("ray.io/cluster", "")
        )
        ports = ray_ports(rc)
        if target.port == ports["dashboard"]:
            if target.scheme == "https":
                raise _unreachable("tls: first record does not look like a TLS handshake")
            return Dashboard(cluster, rc, pod).serve(method, path, body, upgrade=upgrade)
        if target.port in (ports["gcs"], ports["client"]):
            raise _unreachable(
                "net/http: HTTP/1.x transport connection broken: malformed HTTP response "
                f'"{_HTTP2_SETTINGS}"'
            )
    if labels.get("ray.io/cluster") and target.port == rayserve_api.SERVE_PORT:
        served = rayserve_api.proxy(cluster, pod, method, path, body)
        if served is not None:
            return Reply(*served)
    raise _unreachable(f"dial tcp {ip}:{target.port}: connect: connection refused")


def wants_upgrade(headers: list[tuple[str, str]]) -> bool:
    """The request asks for a WebSocket (``Connection: Upgrade``, ``Upgrade: websocket``)."""
    connection = ",".join(v for k, v in headers if k.lower() == "connection").lower()
    upgrade = ",".join(v for k, v in headers if k.lower() == "upgrade").lower()
    return "upgrade" in [t.strip() for t in connection.split(",")] and "websocket" in upgrade


def parse_cookies(header: str) -> dict[str, str]:
    """``Cookie: a=1; b=2`` as a dict (the last of a repeated name wins)."""
    out: dict[str, str] = {}
    for part in header.split(";"):
        name, sep, value = part.strip().partition("=")
        if sep and name:
            out[name] = value
    return out


class ProxyLog:
    """The last :data:`PROXY_LOG_SIZE` requests received on proxy paths (thread-safe)."""

    def __init__(self, size: int = PROXY_LOG_SIZE) -> None:
        self._items: deque[dict[str, Any]] = deque(maxlen=size)
        self._lock = threading.Lock()

    def record(
        self,
        method: str,
        request: ProxyPath,
        query: str,
        headers: list[tuple[str, str]],
        client: str,
        at: float,
    ) -> dict[str, Any]:
        """Note one request; the caller fills ``status`` once answered."""
        received: dict[str, str] = {}
        for k, v in headers:
            received[k] = f"{received[k]}, {v}" if k in received else v
        cookie = "; ".join(v for k, v in headers if k.lower() == "cookie")
        passed = {
            k: v
            for k, v in received.items()
            if k.lower() not in HOP_BY_HOP and k.lower() != "authorization"
        }
        passed["X-Forwarded-For"] = client
        entry: dict[str, Any] = {
            "time": at,
            "method": method,
            "namespace": request.namespace,
            "service": request.service_id,
            "path": request.path,
            "query": query,
            "headers": received,
            "cookies": parse_cookies(cookie),
            "forwardedHeaders": passed,
            "status": None,
        }
        with self._lock:
            self._items.append(entry)
        return entry

    def items(self) -> list[dict[str, Any]]:
        """Copies of the recorded requests, oldest first."""
        with self._lock:
            return [dict(e) for e in self._items]

    def clear(self) -> None:
        """Forget every recorded request."""
        with self._lock:
            self._items.clear()


__all__ = [
    "ProxyLog",
    "ProxyPath",
    "Target",
    "forward",
    "match",
    "resolve",
    "wants_upgrade",
]
