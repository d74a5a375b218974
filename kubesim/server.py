"""HTTP front end: parses requests (paths, query, bodies by media type), routes Kubernetes
REST paths to the API verbs (``verbs.py``), answers Status bodies, injects faults, and
serves discovery, OpenAPI and the admin API under ``/_kubesim``. Service proxy paths
(``serviceproxy.py``) are matched on the raw path, before the normalisation the other
routes get, so that the proxied path and query reach the backend as sent.

Watches (``?watch=true`` on a collection, or the legacy ``/watch/`` paths) are chunked
streams of JSON event lines; ``watch.py`` decides what they carry, ``streams.py`` writes
them, never holding the cluster's lock while it writes.
"""

from __future__ import annotations

import json
import socket
import struct
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any
from urllib.parse import SplitResult, parse_qsl, unquote, urlsplit

import yaml

from kubesim import (
    dcgm,
    errors,
    localrelay,
    openapi,
    protobuf,
    serviceproxy,
    spdyforward,
    streams,
    verbs,
    watch,
    websocket,
)
from kubesim.errors import ApiError
from kubesim.faults import RESET, Seen, verb_of
from kubesim.portforward import serve as serve_portforward
from kubesim.rbac import ADMIN, authenticate, authorize
from kubesim.reviews import REVIEW_KEYS, review

if TYPE_CHECKING:
    from kubesim.simulator import Simulator

VERSION = {
    "major": "1",
    "minor": "33",
    "gitVersion": "v1.33.0-kubesim",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2025-01-01T00:00:00Z",
    "goVersion": "go1.24.0",
    "compiler": "gc",
    "platform": "linux/amd64",
}

_JSON_TYPES = frozenset(
    {
        "application/json",
        "application/merge-patch+json",
        "application/strategic-merge-patch+json",
        "application/json-patch+json",
    }
)
_YAML_TYPES = frozenset({"application/yaml", "application/apply-patch+yaml"})
# How often a WebSocket to the Ray dashboard's log tail looks for new output.
_TAIL_POLL = 0.2


def _yaml(raw: bytes) -> Any:
    """A YAML body; a JSON one (what clients' server-side applies mostly send) is read as
    JSON first, as the API server reads YAML by converting it to JSON: a JSON document
    means the same in both, and the pure-Python YAML scanner was most of the
    simulator's CPU time for an apply."""
    if raw.lstrip()[:1] == b"{":
        try:
            return json.loads(raw)
        except ValueError:
            pass  # YAML flow style that is not JSON: read as YAML below
    try:
        return yaml.safe_load(raw)
    except yaml.YAMLError as exc:
        raise errors.bad_request(f"the body of the request could not be decoded: {exc}") from exc


class Server(ThreadingHTTPServer):
    """A threading HTTP server that knows its simulator."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], sim: Simulator) -> None:
        self.sim = sim
        # Set when the server stops. Its connection threads outlive it (keep-alive, a
        # request asleep in an injected delay): like a stopped API server's, whatever they
        # still hold is dropped unanswered, never applied to the next server's state (a
        # slow apply once landed after a restart without state and made an orphan).
        self.closed = False
        super().__init__(address, Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away mid-request (a killed worker's open watch, a reset
        keep-alive connection) is routine, as it is to an API server: not printed."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class Handler(BaseHTTPRequestHandler):
    """One request: parse, maybe fault, route, answer JSON."""

    protocol_version = "HTTP/1.1"
    # Buffer the response so headers and body leave in one segment; with TCP_NODELAY this
    # avoids the 40 ms Nagle/delayed-ACK stall per keep-alive request.
    wbufsize = 1 << 16
    server: Server
    _seen: Seen | None = None  # the current request as fault injection saw it
    _reset = False  # the current answer is to be cut halfway (an injected RESET)
    _user = ADMIN  # who sent the current request

    def setup(self) -> None:
        """Disable Nagle's algorithm on the connection."""
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: tests and benchmarks make thousands of requests."""

    def do_GET(self) -> None:
        """GET."""
        self._handle("GET")

    def do_POST(self) -> None:
        """POST."""
        self._handle("POST")

    def do_PUT(self) -> None:
        """PUT."""
        self._handle("PUT")

    def do_PATCH(self) -> None:
        """PATCH."""
        self._handle("PATCH")

    def do_DELETE(self) -> None:
        """DELETE."""
        self._handle("DELETE")

    # -- plumbing ----------------------------------------------------------------------

    def send_response(self, code: int, message: str | None = None) -> None:
        """Note the status (the proxy log records it), then send it."""
        self._status = code
        super().send_response(code, message)

    def _send(
        self,
        code: int,
        body: Any,
        headers: dict[str, str] | None = None,
        content_type: str = "application/json",
    ) -> None:
        if not self._body_read:
            # An answer given before the body was read (a 404 route, say) must still consume
            # it, or its bytes would be taken for the next request on this connection.
            self._read()
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-cache, private")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self._write_body(data)

    def _write_body(self, data: bytes) -> None:
        """Write an answer's body; for an injected RESET only its first half, and then the
        connection is reset."""
        if not self._reset:
            self.wfile.write(data)
            return
        self.wfile.write(data[: len(data) // 2])
        self._cut()

    def _cut(self) -> None:
        """Reset the connection now (an injected RESET): what was written is flushed and
        nothing more follows, not even a chunked stream's end."""
        self.close_connection = True
        try:
            self.wfile.flush()
            # SO_LINGER 0: the close that follows sends RST, as a dead load balancer or a
            # killed API server process leaves the client.
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _read(self) -> tuple[bytes, str]:
        """The raw request body and its media type (JSON when not given)."""
        self._body_read = True
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        ctype = (self.headers.get("Content-Type") or "application/json").split(";")[0].strip()
        return raw, ctype

    def _body(self, admin: bool = False) -> tuple[Any, str]:
        """The request body, decoded by its media type, and that type.

        JSON types are read as JSON, YAML types as YAML, protobuf as Kubernetes protobuf; any
        other type is answered 415, as the API server does, rather than guessed at. The admin
        API takes JSON or YAML whatever the header says."""
        raw, ctype = self._read()
        if not raw:
            return None, ctype
        if admin:
            return _yaml(raw), ctype
        self.server.sim.faults.note_body(ctype)
        if ctype == protobuf.MEDIA_TYPE:
            try:
                return protobuf.decode(raw), ctype
            except protobuf.Unsupported as exc:
                raise errors.ApiError(415, "UnsupportedMediaType", str(exc)) from exc
            except protobuf.DecodeError as exc:
                raise errors.bad_request(
                    f"the body of the request could not be decoded as protobuf: {exc}"
                ) from exc
        if ctype in _JSON_TYPES:
            try:
                return json.loads(raw), ctype
            except ValueError as exc:
                raise errors.bad_request(
                    f"the body of the request could not be decoded as JSON: {exc}"
                ) from exc
        if ctype in _YAML_TYPES:
            return _yaml(raw), ctype
        raise errors.unsupported_media(ctype)

    def _pod_log(self, ns: str, name: str, params: dict[str, str]) -> None:
        streams.pod_log(self, ns, name, params)

    def _watch(self, rt: Any, version: str, ns: str | None, params: dict[str, str]) -> None:
        streams.watch_stream(self, rt, version, ns, params)

    def _fault(self, method: str, path: str, params: dict[str, str]) -> Seen | None:
        """Apply fault injection to one request: sleep its delay, cap a list's page, raise
        its injected error; ``None`` when it gets no answer (a dropped connection, or the
        server stopped meanwhile)."""
        if self.server.closed:
            return None
        faults = self.server.sim.faults
        media_type = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        verb = verb_of(method, path, params, media_type)
        delay, seen = faults.pick(method, path, self.headers.get("User-Agent", ""), verb)
        self._seen = seen  # _handle marks when an injected error was answered
        if delay:
            time.sleep(delay)
        if seen.code == 0 or self.server.closed:
            return None
        self._reset = seen.code == RESET
        max_page = faults.config.max_page
        if max_page and method == "GET":
            asked = int(params.get("limit") or 0)
            params["limit"] = str(min(asked, max_page) if asked else max_page)
        if seen.code is not None and seen.code > 0 and not (seen.code == 410 and verb == "watch"):
            self._read()
            parts = [p for p in path.split("/") if p]
            name = parts[-1] if len(parts) > 4 else ""
            plural = parts[-2] if len(parts) > 4 else (parts[-1] if parts else "")
            raise faults.error(seen.code, plural, name)
        return seen

    def _handle(self, method: str) -> None:
        self._body_read = False
        self._status = 0
        self._reset = False
        split = urlsplit(self.path)
        path = unquote(split.path).rstrip("/") or "/"
        params = dict(parse_qsl(split.query, keep_blank_values=True))
        sim = self.server.sim
        proxied = None if path.startswith("/_kubesim") else serviceproxy.match(split.path)
        entry = None
        self._seen = None
        if proxied is not None:
            entry = sim.proxy_log.record(
                method,
                proxied,
                split.query,
                list(self.headers.items()),
                self.client_address[0],
                sim.cluster.clock.time(),
            )
        try:
            if path.startswith("/_kubesim"):
                body, _ = self._body(admin=True)
                self._send(200, sim.admin(method, path, body))
                return
            if self._fault(method, path, params) is None:  # dropped: no answer at all
                self.close_connection = True
                return
            self._user = authenticate(sim.cluster, self.headers)
            authorize(sim.cluster, self._user, method, split.path, params)
            if proxied is not None:
                self._proxy(method, proxied, split)
            elif dcgm.NODE_PROXY.match(path):
                self._node_proxy(method, path)
            else:
                self._route(method, path, params)
        except ApiError as exc:
            self._send(exc.code, exc.status(), exc.headers)
        except (ConnectionError, BrokenPipeError):
            return
        except Exception as exc:  # noqa: BLE001 - a server answers 500, it does not die
            err = ApiError(500, "InternalError", f"Internal error occurred: {exc!r}")
            self._send(500, err.status())
        finally:
            if entry is not None:
                entry["status"] = self._status
            if self._seen is not None and self._seen.code is not None:
                self._seen.answered = time.monotonic()

    def _node_proxy(self, method: str, path: str) -> None:
        """A node proxy request: only the DCGM exporter's port answers (``dcgm.py``)."""
        cluster = self.server.sim.cluster
        with cluster.lock:
            code, body = dcgm.node_proxy(cluster, method, path)
        ctype = dcgm.TEXT if isinstance(body, bytes) else "application/json"
        self._send(code, body, content_type=ctype)

    def _proxy(self, method: str, proxied: serviceproxy.ProxyPath, split: SplitResult) -> None:
        """A service proxy request: 301 to ``.../proxy/`` for the bare path, else the
        backend's answer as it gave it."""
        raw, _ = self._read()
        if proxied.path is None:
            query = f"?{split.query}" if split.query else ""
            self.send_response(301)
            self.send_header("Location", f"{split.path}/{query}")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        cluster = self.server.sim.cluster
        headers = list(self.headers.items())
        upgrade = method == "GET" and serviceproxy.wants_upgrade(headers)
        with cluster.lock:
            target = serviceproxy.resolve(cluster, proxied.namespace, proxied.service_id)
            local = serviceproxy.local_address(cluster, target)
            reply = (
                None
                if local is not None
                else serviceproxy.forward(
                    cluster, target, method, proxied.path, raw, upgrade=upgrade
                )
            )
        if reply is None:
            assert local is not None
            # A real process serves the port: the connection is relayed to it as is,
            # outside the cluster's lock, and closed after.
            self.close_connection = True
            self._status = localrelay.relay(
                self.connection,
                self.rfile,
                local,
                method=method,
                target=proxied.raw_path + (f"?{split.query}" if split.query else ""),
                headers=headers,
                body=raw,
                client_ip=self.client_address[0],
                upgrade=upgrade,
                stopping=self.server.sim.stopping.is_set,
            )
            return
        if reply.tail is not None:
            self._websocket(reply.tail, headers)
            return
        self.send_response(reply.status)
        self.send_header("Content-Type", reply.content_type)
        self.send_header("Content-Length", str(len(reply.body)))
        for k, v in reply.headers.items():
            self.send_header(k, v)
        self.end_headers()
        self._write_body(reply.body)

    def _websocket(self, look: websocket.Look, headers: list[tuple[str, str]]) -> None:
        """The backend took the upgrade: the connection is its WebSocket from here on."""
        self.close_connection = True
        conversation = websocket.accept(self.connection, self.wfile, self.path, headers)
        if conversation is None:
            self._status = 400
            return
        self._status = 101
        try:
            websocket.stream_text(conversation, look, self.server.sim.stopping, _TAIL_POLL)
        except OSError:
            return  # the client went while we wrote

    def _portforward(self, ns: str, name: str) -> None:
        """``pods/portforward``: the kubelet's WebSocket channels (``portforward.py``)."""
        headers = list(self.headers.items())
        sim, sock, out = self.server.sim, self.connection, self.wfile
        self.close_connection = True
        if spdyforward.asks_spdy(headers):  # kubectl's own protocol (spdyforward.py)
            self._status = spdyforward.serve_upgrade(sim, sock, out, headers, (ns, name))
        elif spdyforward.asks_tunnel(headers):
            args = (sim, sock, out, self.path, headers, (ns, name))
            self._status = spdyforward.serve_tunnel(*args)
        else:
            self._status = serve_portforward(sim, sock, out, self.path, headers, (ns, name))

    # Named exception to ruff's C901 (max-complexity 12): the URL grammar of the Kubernetes API, one
    # branch per path shape kubectl sends.
    def _route(self, method: str, path: str, params: dict[str, str]) -> None:  # noqa: C901
        sim = self.server.sim
        cluster = sim.cluster
        reg = cluster.registry
        if method == "GET":
            if path == "/version":
                return self._send(200, VERSION)
            if path in ("/healthz", "/livez", "/readyz"):
                return self._send(200, b"ok")
            if path == "/api":
                return self._send(200, reg.api_versions(f"127.0.0.1:{sim.port}"))
            if path == "/apis":
                listing = reg.api_group_list()
                listing["groups"] = [
                    g for g in listing["groups"] if g["name"] not in cluster.absent_groups
                ]
                return self._send(200, listing)
            if path.startswith("/openapi/"):
                code, data, ctype, extra = openapi.answer(
                    reg, path, self.headers.get("Accept", ""), self.headers.get("If-None-Match", "")
                )
                return self._send(code, data, extra, content_type=ctype)
        parts = [p for p in path.split("/") if p]
        if parts[:1] == ["apis"] and len(parts) >= 2 and parts[1] in cluster.absent_groups:
            raise errors.ApiError(
                404, "NotFound", "the server could not find the requested resource"
            )
        if path.startswith("/apis/visibility.kueue.x-k8s.io/"):
            with cluster.lock:
                return self._send(200, cluster.kueue.visibility(method, path))
        if parts[:1] == ["api"] and len(parts) >= 2:
            group, version, rest = "", parts[1], parts[2:]
        elif parts[:1] == ["apis"] and len(parts) >= 3:
            group, version, rest = parts[1], parts[2], parts[3:]
        elif parts[:1] == ["apis"] and len(parts) == 2 and method == "GET":
            if parts[1] not in reg.groups():
                raise errors.ApiError(
                    404, "NotFound", "the server could not find the requested resource"
                )
            return self._send(200, reg.api_group(parts[1]))
        else:
            raise errors.ApiError(
                404, "NotFound", "the server could not find the requested resource"
            )
        if not rest:
            if method != "GET":
                raise errors.method_not_allowed()
            doc = reg.resource_list(group, version)
            if doc is None:
                raise errors.ApiError(
                    404, "NotFound", "the server could not find the requested resource"
                )
            return self._send(200, doc)
        if group == "" and len(rest) == 5 and rest[0] == "namespaces" and rest[2] == "pods":
            # kubectl POSTs its SPDY upgrade; a WebSocket's handshake is a GET.
            allowed = ("GET", "POST") if rest[4] == "portforward" else ("GET",)
            if rest[4] not in ("log", "portforward") or method not in allowed:
                raise errors.method_not_allowed()
            if rest[4] == "portforward":
                return self._portforward(rest[1], rest[3])
            return self._pod_log(rest[1], rest[3], params)
        legacy_watch = rest[0] == "watch" and len(rest) > 1
        if legacy_watch:
            # The deprecated /watch/ paths: a watch of the collection (of one object when
            # the path names it).
            rest = rest[1:]
            params["watch"] = "true"
        ns: str | None = None
        if rest[0] == "namespaces" and len(rest) >= 3 and rest[2] not in ("status", "finalize"):
            ns, rest = rest[1], rest[2:]
        plural, name = rest[0], (rest[1] if len(rest) > 1 else "")
        sub = rest[2] if len(rest) > 2 else ""
        rt = reg.lookup(group, version, plural)
        if rt is None or len(rest) > 3 or (sub and sub not in ("status", "finalize")):
            raise errors.ApiError(
                404, "NotFound", "the server could not find the requested resource"
            )
        if sub == "status" and not rt.status_subresource:
            raise errors.ApiError(
                404, "NotFound", "the server could not find the requested resource"
            )
        if rt.namespaced and name and ns is None:
            raise errors.ApiError(
                404, "NotFound", "the server could not find the requested resource"
            )
        if not rt.namespaced and ns is not None:
            raise errors.ApiError(
                404, "NotFound", "the server could not find the requested resource"
            )
        body, ctype = self._body() if method in ("POST", "PUT", "PATCH", "DELETE") else (None, "")
        if rt.key in REVIEW_KEYS:
            return self._send(201, review(cluster, self._user, rt, method, body))
        if method == "GET" and watch.is_watch(params) and not sub and (legacy_watch or not name):
            # ``?watch`` on a named object is ignored (a plain GET), as the API server does.
            if name:
                selector = params.get("fieldSelector")
                named = f"metadata.name={name}"
                params["fieldSelector"] = f"{selector},{named}" if selector else named
            return self._watch(rt, version, ns, params)
        if ctype != "application/apply-patch+yaml" and not params.get("fieldManager"):
            # The API server names an update's manager after the client's User-Agent.
            params["fieldManager"] = (self.headers.get("User-Agent") or "").split("/")[0]
        want_table = "as=Table" in (self.headers.get("Accept") or "")
        with cluster.lock:
            cluster.warnings = []
            code, result = verbs.handle(
                cluster,
                method=method,
                rt=rt,
                version=version,
                ns=ns,
                name=name,
                subresource=sub,
                body=body,
                ctype=ctype,
                params=params,
                want_table=want_table,
            )
            data = result if isinstance(result, bytes) else json.dumps(result).encode()
            headers = {"Warning": f'299 - "{cluster.warnings[0]}"'} if cluster.warnings else {}
        self._send(code, data, headers)
