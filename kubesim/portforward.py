"""``pods/portforward`` over WebSocket, as the kubelet serves it behind the API server.

``GET /api/v1/namespaces/{ns}/pods/{name}/portforward?ports=N[,M]`` upgrades to a WebSocket
with the kubelet's channels (port *i* has data channel ``2i`` and error channel ``2i+1``).
Behind a port: the pod's real process, else an echo stand-in for a declared port, else the
kubelet's error. The conversation ends when every port is done, the client closes, or
kubesim stops. kubesim/README.md (*Port-forward*) gives the wire format.
"""

from __future__ import annotations

import base64
import io
import select
import socket
import threading
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, urlsplit

from websockets.exceptions import NegotiationError
from websockets.frames import Frame, Opcode
from websockets.protocol import State
from websockets.server import ServerProtocol

from kubesim import errors, websocket
from kubesim.store import Obj
from kubesim.util import get_path

if TYPE_CHECKING:
    from kubesim.localproc import LocalProcesses
    from kubesim.simulator import Simulator

BINARY = "v4.channel.k8s.io"
BASE64 = "v4.base64.channel.k8s.io"
# The kubelet's order of preference (its portforward handler offers no v5).
PROTOCOLS = (BINARY, BASE64)
_POLL = 0.2


def requested_ports(raw_path: str) -> list[int]:
    """The ``ports`` of the query (repeated or comma-separated, as the kubelet reads
    them); a missing or bad one is the kubelet's 400."""
    values = [v for k, v in parse_qsl(urlsplit(raw_path).query) if k in ("ports", "port")]
    ports: list[int] = []
    for value in ",".join(values).split(","):
        if not value.strip():
            continue
        try:
            port = int(value)
        except ValueError:
            raise errors.bad_request(f'unable to parse "{value}" as a port') from None
        if not 0 < port < 65536:
            raise errors.bad_request(f'port "{value}" must be > 0 and < 65536')
        ports.append(port)
    if not ports:
        raise errors.bad_request('"port" is required')
    return ports


def check_pod(pod: Obj | None, ns: str, name: str) -> None:
    """The API server's refusals before any upgrade: no such pod, no node, not running."""
    if pod is None:
        raise errors.not_found("pods", "", name)
    if not get_path(pod, "spec", "nodeName"):
        raise errors.bad_request(f"pod {name} does not have a host assigned")
    if get_path(pod, "status", "phase") != "Running":
        raise errors.bad_request(f"unable to upgrade connection: pod {ns}/{name} is not running")


def declared_ports(pod: Obj) -> set[int]:
    """Every containerPort the pod's containers declare."""
    return {
        int(p["containerPort"])
        for c in get_path(pod, "spec", "containers") or []
        for p in c.get("ports") or []
        if "containerPort" in p
    }


def _choose(_: ServerProtocol, offered: Sequence[str]) -> str | None:
    if not offered:
        return None
    for protocol in PROTOCOLS:
        if protocol in offered:
            return protocol
    raise NegotiationError(f"requested protocol(s) are not supported: {list(offered)}")


@dataclass
class Port:
    """One forwarded port: its channels' index and what is behind it."""

    index: int
    number: int
    target: socket.socket | None = None  # a real process's connection
    echo: bool = False
    error: str = ""
    done: bool = False
    pending: list[bytes] = field(default_factory=list)


class Forward:
    """One accepted port-forward conversation (see the module)."""

    def __init__(self, conversation: websocket.Conversation, ports: list[Port]) -> None:
        self.conversation = conversation
        self.ports = ports
        self.text = conversation.protocol.subprotocol == BASE64

    def send(self, channel: int, data: bytes) -> None:
        """One message on ``channel``."""
        if self.text:
            payload = str(channel).encode() + base64.b64encode(data)
            self.conversation.protocol.send_text(payload)
        else:
            self.conversation.protocol.send_binary(bytes([channel]) + data)

    def open(self) -> None:
        """The first message of every channel: its port, little-endian."""
        for port in self.ports:
            first = port.number.to_bytes(2, "little")
            self.send(2 * port.index, first)
            self.send(2 * port.index + 1, first)
            if port.error:
                self.send(2 * port.index + 1, port.error.encode())
                port.done = True
        self.conversation.flush()

    def _receive(self) -> bool:
        protocol = self.conversation.protocol
        if protocol.state is State.CLOSED:
            return False
        try:
            while select.select([self.conversation.sock], [], [], 0)[0]:
                data = self.conversation.sock.recv(65536)
                if not data:
                    protocol.receive_eof()
                    break
                protocol.receive_data(data)
        except OSError:
            return False
        for frame in protocol.events_received():
            if not isinstance(frame, Frame):
                continue
            if frame.opcode is Opcode.BINARY:
                self._to_port(frame.data[0] if frame.data else -1, bytes(frame.data[1:]))
            elif frame.opcode is Opcode.TEXT and frame.data:
                channel = frame.data[0] - ord("0")
                self._to_port(channel, base64.b64decode(bytes(frame.data[1:])))
        self.conversation.flush()
        return protocol.state is State.OPEN

    def _to_port(self, channel: int, data: bytes) -> None:
        if channel < 0 or channel % 2 or channel // 2 >= len(self.ports) or not data:
            return  # only data channels carry anything from the client
        port = self.ports[channel // 2]
        if port.done:
            return
        if port.echo:
            port.pending.append(data)
        elif port.target is not None:
            try:
                port.target.sendall(data)
            except OSError:
                self._end(port)

    def _end(self, port: Port) -> None:
        port.done = True
        if port.target is not None:
            port.target.close()

    def run(self, stop: threading.Event) -> None:
        """Relay until every port is done, the client leaves, or ``stop``."""
        self.open()
        while not stop.is_set() and any(not p.done for p in self.ports):
            for port in self.ports:
                while port.pending:
                    self.send(2 * port.index, port.pending.pop(0))
            self.conversation.flush()
            targets = {p.target: p for p in self.ports if p.target is not None and not p.done}
            readable, _, _ = select.select([self.conversation.sock, *targets], [], [], _POLL)
            if self.conversation.sock in readable and not self._receive():
                break
            for sock in readable:
                if sock not in targets:
                    continue
                port = targets[sock]
                try:
                    data = sock.recv(65536)
                except OSError:
                    data = b""
                if data:
                    self.send(2 * port.index, data)
                else:
                    self._end(port)
            self.conversation.flush()
        for port in self.ports:
            self._end(port)
        if self.conversation.protocol.state is State.OPEN:
            self.conversation.close()


def connect_ports(
    ports: list[int],
    pod: Obj,
    address: dict[int, tuple[str, int] | None],
    *,
    real_ports: Collection[int] | None = (),
) -> list[Port]:
    """What is behind each port: the real process, the echo stand-in, or the error.

    ``real_ports`` are those kubesim runs (or is about to run: ``None``, not known yet)
    a real process for. The echo never stands in for one of them: until its process
    listens the port is refused, as the kubelet refuses one nothing listens on, so a
    client retries instead of speaking to an echo."""
    meta = pod["metadata"]
    declared = declared_ports(pod) if real_ports is not None else set()
    declared -= set(real_ports or ())
    found: list[Port] = []
    for index, number in enumerate(ports):
        port = Port(index, number)
        where = address.get(number)
        if where is not None:
            try:
                port.target = socket.create_connection(where, timeout=5)
                port.target.settimeout(None)
            except OSError as exc:
                port.error = _refused(meta, number, str(exc))
        elif number in declared:
            port.echo = True
        else:
            port.error = _refused(meta, number, "connect: connection refused")
        found.append(port)
    return found


def _refused(meta: Obj, port: int, why: str) -> str:
    return (
        f"error forwarding port {port} to pod {meta['namespace']}/{meta['name']}, "
        f"uid {meta.get('uid', '')}: failed to connect to localhost:{port} inside the pod: {why}"
    )


def serve(
    sim: Simulator,
    sock: socket.socket,
    out: io.BufferedIOBase,
    raw_path: str,
    headers: list[tuple[str, str]],
    key: tuple[str, str],
) -> int:
    """Check the request (its refusals raise :class:`~kubesim.errors.ApiError`), take the
    upgrade and relay until the conversation ends; the status answered."""
    ns, name = key
    cluster = sim.cluster
    ports = requested_ports(raw_path)
    with cluster.lock:
        pod = cluster.store.get("pods", ns, name)
        check_pod(pod, ns, name)
    assert pod is not None
    procs: LocalProcesses = getattr(cluster, "localprocs")  # noqa: B009 (typed here)
    where = {p: procs.address(ns, name, p) for p in ports}
    behind = connect_ports(ports, pod, where, real_ports=procs.real_ports((ns, name)))
    conversation = websocket.accept(
        sock, out, raw_path, headers, subprotocols=list(PROTOCOLS), select_subprotocol=_choose
    )
    if conversation is None:
        for port in behind:
            if port.target is not None:
                port.target.close()
        return 400
    Forward(conversation, behind).run(sim.stopping)
    return 101


__all__ = ["PROTOCOLS", "Forward", "check_pod", "connect_ports", "requested_ports", "serve"]
