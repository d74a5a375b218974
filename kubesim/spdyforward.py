"""``pods/portforward`` as kubectl speaks it: ``portforward.k8s.io`` over SPDY/3.1.

Two ways in, one protocol: a plain upgrade (``Upgrade: SPDY/3.1``, kubectl's POST) answered
101, or a WebSocket offering ``SPDY/3.1+portforward.k8s.io`` (KEP-4006) carrying the same
bytes. As the kubelet does, the server accepts each stream, connects a request's port once
it has both its ``error`` and ``data`` streams (the backends of :mod:`kubesim.portforward`)
and relays the bytes. kubesim/README.md (*kubectl's protocol*) gives the details.
"""

from __future__ import annotations

import io
import select
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from websockets.frames import Frame as WsFrame
from websockets.frames import Opcode
from websockets.protocol import State

from kubesim import errors, spdy, websocket
from kubesim.portforward import Port, check_pod, connect_ports
from kubesim.store import Obj

if TYPE_CHECKING:
    from kubesim.simulator import Simulator

SPDY_UPGRADE = "SPDY/3.1"
PROTOCOL = "portforward.k8s.io"
TUNNEL = f"{SPDY_UPGRADE}+{PROTOCOL}"
_POLL = 0.2
# What is behind a port of the pod, connected when a request has both its streams.
Locate = Callable[[int], Port]


def _header(headers: list[tuple[str, str]], name: str) -> str:
    return ", ".join(v for k, v in headers if k.lower() == name.lower())


def asks_spdy(headers: list[tuple[str, str]]) -> bool:
    """A plain SPDY/3.1 upgrade (kubectl's fallback, and its only way before v1.31)."""
    return SPDY_UPGRADE.lower() in _header(headers, "Upgrade").lower().replace(" ", "").split(",")


def asks_tunnel(headers: list[tuple[str, str]]) -> bool:
    """A WebSocket that offers SPDY tunnelled in it (KEP-4006)."""
    offered = _header(headers, "Sec-WebSocket-Protocol").replace(" ", "").split(",")
    return _header(headers, "Upgrade").lower() == "websocket" and TUNNEL in offered


@dataclass
class Request:
    """One forwarded connection: its two streams and what is behind its port."""

    port: int
    error_stream: int = 0
    data_stream: int = 0
    behind: Port | None = None
    done: bool = False
    pending: list[spdy.Frame] = field(default_factory=list)


class Session:
    """The kubelet's side of one port-forward SPDY session (see the module)."""

    def __init__(self, connect: Locate, send: Callable[[bytes], None]) -> None:
        self.codec = spdy.Codec()
        self.connect = connect
        self.send = send
        self.requests: dict[str, Request] = {}
        self.streams: dict[int, Request] = {}
        self.last_stream = 0
        self.ended = False

    def receive(self, data: bytes) -> None:
        """Take the client's bytes; a framing error ends the session (GOAWAY)."""
        try:
            frames = self.codec.feed(data)
        except spdy.ProtocolError:
            self.send(self.codec.goaway(self.last_stream, spdy.PROTOCOL_ERROR))
            self.ended = True
            return
        for frame in frames:
            self._frame(frame)

    def _frame(self, frame: spdy.Frame) -> None:
        if frame.kind == spdy.SYN_STREAM:
            self._new_stream(frame)
        elif frame.kind == 0:
            self._data(frame)
        elif frame.kind == spdy.RST_STREAM:
            request = self.streams.get(frame.stream)
            if request is not None:
                self._finish(request, close_streams=False)
        elif frame.kind == spdy.PING:
            self.send(self.codec.ping(int.from_bytes(frame.payload[:4], "big")))
        elif frame.kind == spdy.GOAWAY:
            self.ended = True
        # SETTINGS, WINDOW_UPDATE, HEADERS: nothing to do for the kubelet either.

    def _new_stream(self, frame: spdy.Frame) -> None:
        stream, headers = frame.stream, frame.headers
        self.last_stream = max(self.last_stream, stream)
        kind, request_id = headers.get("streamtype", ""), headers.get("requestid", "")
        try:
            port = int(headers.get("port", ""))
        except ValueError:
            port = 0
        if kind not in ("error", "data") or not request_id or not 0 < port < 65536:
            # The kubelet refuses a stream it cannot place.
            self.send(self.codec.rst_stream(stream, spdy.REFUSED_STREAM))
            return
        self.send(self.codec.syn_reply(stream))
        request = self.requests.setdefault(request_id, Request(port))
        if kind == "error":
            request.error_stream = stream
        else:
            request.data_stream = stream
        self.streams[stream] = request
        if request.error_stream and request.data_stream and request.behind is None:
            self._connect(request)

    def _connect(self, request: Request) -> None:
        request.behind = behind = self.connect(request.port)
        if behind.error:
            self.send(self.codec.data(request.error_stream, behind.error.encode()))
            self._finish(request)
        # What the data stream carried before the error stream came, in order.
        early, request.pending = request.pending, []
        for frame in early:
            self._data(frame)

    def _data(self, frame: spdy.Frame) -> None:
        request = self.streams.get(frame.stream)
        if request is None or request.done or frame.stream != request.data_stream:
            return  # the error stream carries nothing from the client
        behind = request.behind
        if behind is None:
            request.pending.append(frame)
        elif behind.echo:
            if frame.payload:
                self.send(self.codec.data(request.data_stream, frame.payload))
            if frame.fin:
                self._finish(request)
        elif behind.target is not None:
            try:
                if frame.payload:
                    behind.target.sendall(frame.payload)
                if frame.fin:
                    behind.target.shutdown(socket.SHUT_WR)
            except OSError:
                self._finish(request)

    def targets(self) -> dict[socket.socket, Request]:
        """The pod-side connections still open, to wait on."""
        return {
            r.behind.target: r
            for r in self.requests.values()
            if r.behind is not None and r.behind.target is not None and not r.done
        }

    def from_pod(self, request: Request) -> None:
        """Relay what the pod's side sent; its end closes the request's streams."""
        assert request.behind is not None and request.behind.target is not None
        try:
            data = request.behind.target.recv(65536)
        except OSError:
            data = b""
        if data:
            self.send(self.codec.data(request.data_stream, data))
        else:
            self._finish(request)

    def _finish(self, request: Request, *, close_streams: bool = True) -> None:
        if request.done:
            return
        request.done = True
        if request.behind is not None and request.behind.target is not None:
            request.behind.target.close()
        if close_streams:
            self.send(self.codec.data(request.data_stream, b"", fin=True))
            self.send(self.codec.data(request.error_stream, b"", fin=True))

    def close(self) -> None:
        """End every request (kubesim stops, or the client went)."""
        for request in self.requests.values():
            self._finish(request, close_streams=False)


def relay(
    session: Session, sock: socket.socket, pull: Callable[[], bool], stop: threading.Event
) -> None:
    """Wait on the client and the pod's side; ``pull`` reads the client (False: it went)."""
    try:
        while not stop.is_set() and not session.ended:
            targets = session.targets()
            readable, _, _ = select.select([sock, *targets], [], [], _POLL)
            if sock in readable and not pull():
                break
            for ready in readable:
                if ready in targets:
                    session.from_pod(targets[ready])
    finally:
        session.close()


def _locator(sim: Simulator, pod: Obj, key: tuple[str, str]) -> Locate:
    procs = getattr(sim.cluster, "localprocs")  # noqa: B009 (typed in portforward.serve)

    def connect(port: int) -> Port:
        where = {port: procs.address(key[0], key[1], port)}
        (found,) = connect_ports([port], pod, where, real_ports=procs.real_ports(key))
        return found

    return connect


def _pod(sim: Simulator, key: tuple[str, str]) -> Obj:
    with sim.cluster.lock:
        pod = sim.cluster.store.get("pods", *key)
        check_pod(pod, *key)
    assert pod is not None
    return pod


def serve_upgrade(
    sim: Simulator,
    sock: socket.socket,
    out: io.BufferedIOBase,
    headers: list[tuple[str, str]],
    key: tuple[str, str],
) -> int:
    """The plain SPDY/3.1 upgrade: 101, then the session on the connection itself."""
    pod = _pod(sim, key)
    version = _header(headers, "X-Stream-Protocol-Version").replace(" ", "").split(",")
    if PROTOCOL not in version:
        raise errors.bad_request(f"unable to upgrade: no common stream protocol among {version}")
    out.write(
        b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n"
        + f"Upgrade: {SPDY_UPGRADE}\r\nX-Stream-Protocol-Version: {PROTOCOL}\r\n\r\n".encode()
    )
    out.flush()

    def send(data: bytes) -> None:
        out.write(data)
        out.flush()

    session = Session(_locator(sim, pod, key), send)

    def pull() -> bool:
        try:
            data = sock.recv(65536)
        except OSError:
            return False
        session.receive(data)
        return bool(data)

    relay(session, sock, pull, sim.stopping)
    return 101


def serve_tunnel(
    sim: Simulator,
    sock: socket.socket,
    out: io.BufferedIOBase,
    raw_path: str,
    headers: list[tuple[str, str]],
    key: tuple[str, str],
) -> int:
    """SPDY tunnelled in a WebSocket's binary messages (KEP-4006)."""
    pod = _pod(sim, key)
    # The subprotocol's "/" and "+" are outside the token grammar the WebSocket library
    # checks offers against (Kubernetes' servers take it): it is chosen here instead.
    plain = [(k, v) for k, v in headers if k.lower() != "sec-websocket-protocol"]
    conversation = websocket.accept(sock, out, raw_path, plain, chosen=TUNNEL)
    if conversation is None:
        return 400
    protocol = conversation.protocol

    def send(data: bytes) -> None:
        if protocol.state is State.OPEN:
            protocol.send_binary(data)
            conversation.flush()

    session = Session(_locator(sim, pod, key), send)

    def pull() -> bool:
        try:
            data = sock.recv(65536)
        except OSError:
            return False
        if not data:
            protocol.receive_eof()
        else:
            protocol.receive_data(data)
        for event in protocol.events_received():
            if isinstance(event, WsFrame) and event.opcode in (Opcode.BINARY, Opcode.CONT):
                session.receive(bytes(event.data))
        conversation.flush()
        return protocol.state is State.OPEN

    relay(session, sock, pull, sim.stopping)
    if protocol.state is State.OPEN:
        conversation.close()
    return 101


__all__ = ["TUNNEL", "Session", "asks_spdy", "asks_tunnel", "serve_tunnel", "serve_upgrade"]
