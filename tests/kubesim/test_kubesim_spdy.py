"""``pods/portforward``'s SPDY/3.1 session frame by frame, over a plain socket: what
kubectl's tests cannot show (a refused stream, a PING answered, the upgrade's refusal
without the stream protocol). Frames are written here as SPDY/3 lays them out, header
blocks compressed with zlib and the protocol's dictionary."""

from __future__ import annotations

import socket
import struct
import zlib
from collections.abc import Iterator

import pytest
from kubernetes import client

from kubesim import KubeSim, spdy
from tests.kubesim.test_kubesim_portforward import _pod, _running, api, psim

__all__ = ["api", "psim"]


class Client:
    """A SPDY client on a socket upgraded by kubesim."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.deflate = zlib.compressobj(zdict=spdy.DICTIONARY)
        self.codec = spdy.Codec()  # reads the server's frames
        self.frames: list[spdy.Frame] = []

    def syn_stream(self, stream: int, headers: dict[str, str]) -> None:
        raw = struct.pack(">I", len(headers))
        for name, value in headers.items():
            for part in (name.encode(), value.encode()):
                raw += struct.pack(">I", len(part)) + part
        block = self.deflate.compress(raw) + self.deflate.flush(zlib.Z_SYNC_FLUSH)
        self.control(spdy.SYN_STREAM, struct.pack(">IIH", stream, 0, 0) + block)

    def control(self, kind: int, payload: bytes) -> None:
        head = struct.pack(">HH", 0x8000 | 3, kind) + b"\0" + len(payload).to_bytes(3, "big")
        self.sock.sendall(head + payload)

    def data(self, stream: int, data: bytes, fin: bool = False) -> None:
        self.sock.sendall(spdy.Codec.data(stream, data, fin=fin))

    def next(self) -> spdy.Frame:
        while not self.frames:
            more = self.sock.recv(65536)
            assert more, "the server hung up"
            self.frames += self.codec.feed(more)
        return self.frames.pop(0)


def _upgrade(psim: KubeSim, pod: str, version: str | None) -> tuple[socket.socket, bytes]:
    sock = socket.create_connection(("127.0.0.1", psim.port), timeout=30)
    extra = f"X-Stream-Protocol-Version: {version}\r\n" if version else ""
    sock.sendall(
        f"POST /api/v1/namespaces/default/pods/{pod}/portforward HTTP/1.1\r\n"
        f"Host: 127.0.0.1\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n{extra}"
        "Content-Length: 0\r\n\r\n".encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        more = sock.recv(1)
        assert more
        head += more
    return sock, head


@pytest.fixture
def session(psim: KubeSim, api: client.ApiClient) -> Iterator[Client]:
    core = client.CoreV1Api(api)
    core.create_namespaced_pod("default", _pod("plain", [7000]))
    _running(core, "plain")
    sock, head = _upgrade(psim, "plain", "portforward.k8s.io")
    assert head.startswith(b"HTTP/1.1 101 Switching Protocols\r\n")
    assert b"Upgrade: SPDY/3.1\r\n" in head
    assert b"X-Stream-Protocol-Version: portforward.k8s.io\r\n" in head
    with sock:
        yield Client(sock)


def test_a_request_s_two_streams_relay_to_the_echo_and_close_together(session: Client) -> None:
    session.syn_stream(1, {"streamtype": "error", "port": "7000", "requestid": "0"})
    session.syn_stream(3, {"streamtype": "data", "port": "7000", "requestid": "0"})
    replies = [session.next(), session.next()]
    assert [(f.kind, f.stream) for f in replies] == [(spdy.SYN_REPLY, 1), (spdy.SYN_REPLY, 3)]
    session.data(3, b"over spdy")
    echoed = session.next()
    assert (echoed.kind, echoed.stream, echoed.payload) == (0, 3, b"over spdy")
    session.data(3, b"", fin=True)  # the client is done: so is the echo
    ends = {(f.stream, f.fin, f.payload) for f in (session.next(), session.next())}
    assert ends == {(3, True, b""), (1, True, b"")}


def test_a_stream_without_its_request_id_is_refused_and_a_ping_answered(session: Client) -> None:
    session.syn_stream(1, {"streamtype": "data", "port": "7000"})
    refused = session.next()
    assert (refused.kind, refused.stream) == (spdy.RST_STREAM, 1)
    assert refused.payload[4:] == struct.pack(">I", spdy.REFUSED_STREAM)
    session.control(spdy.PING, struct.pack(">I", 7))
    pong = session.next()
    assert (pong.kind, pong.payload) == (spdy.PING, struct.pack(">I", 7))


def test_the_refusal_of_a_port_is_written_on_the_error_stream(session: Client) -> None:
    session.syn_stream(1, {"streamtype": "error", "port": "9999", "requestid": "5"})
    session.syn_stream(3, {"streamtype": "data", "port": "9999", "requestid": "5"})
    frames = [session.next() for _ in range(5)]  # two replies, the message, two FINs
    message = [f.payload for f in frames if f.kind == 0 and f.stream == 1 and f.payload]
    assert message and b"error forwarding port 9999 to pod default/plain" in message[0]
    assert {(f.stream, f.fin) for f in frames if f.kind == 0 and f.fin} == {(1, True), (3, True)}


def test_an_upgrade_without_the_stream_protocol_is_refused(
    psim: KubeSim, api: client.ApiClient
) -> None:
    core = client.CoreV1Api(api)
    core.create_namespaced_pod("default", _pod("plain", [7000]))
    _running(core, "plain")
    sock, head = _upgrade(psim, "plain", None)
    sock.close()
    assert head.startswith(b"HTTP/1.1 400 ")


def test_data_sent_before_the_error_stream_opens_is_relayed_once_it_does(
    session: Client,
) -> None:
    session.syn_stream(1, {"streamtype": "data", "port": "7000", "requestid": "9"})
    session.data(1, b"early")
    session.syn_stream(3, {"streamtype": "error", "port": "7000", "requestid": "9"})
    frames = [session.next() for _ in range(3)]
    assert [(f.kind, f.stream) for f in frames[:2]] == [(spdy.SYN_REPLY, 1), (spdy.SYN_REPLY, 3)]
    assert (frames[2].kind, frames[2].stream, frames[2].payload) == (0, 1, b"early")
