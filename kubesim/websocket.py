"""A server-side WebSocket on a connection whose HTTP handshake ``server.py`` has parsed:
what a backend behind the API server's service proxy (the Ray dashboard's log tail) does
once the API server has carried the client's upgrade to it.

The protocol is the ``websockets`` library's (sans I/O): it checks the handshake (an
invalid one gets its 400, and no conversation), frames what is sent, answers pings and
the client's close. :func:`stream_text` sends a text source's new text as it appears and
closes normally (1000) when the source ends, as aiohttp does when Ray's handler returns.
"""

from __future__ import annotations

import io
import select
import socket
import threading
import time
from collections.abc import Callable, Sequence

from websockets.frames import CloseCode
from websockets.http11 import Request
from websockets.protocol import State
from websockets.server import ServerProtocol

# How long the server waits for the client's answer to its close before hanging up.
CLOSE_WAIT_SECONDS = 2.0
# Look = (sent so far) -> (new text, the source has ended); None when the source is gone
# (the connection is then dropped without a close, as a dying backend's would be).
Look = Callable[[int], tuple[str, bool] | None]


class Conversation:
    """One accepted WebSocket over a blocking socket."""

    def __init__(
        self, sock: socket.socket, out: io.BufferedIOBase, protocol: ServerProtocol
    ) -> None:
        self.sock = sock
        self.out = out
        self.protocol = protocol

    def flush(self) -> None:
        """Write what the protocol has queued (frames, a pong, a close)."""
        for data in self.protocol.data_to_send():
            if data:
                self.out.write(data)
        self.out.flush()

    def read_incoming(self) -> bool:
        """Take what the client sent so far (without waiting); False once it closed or
        left. Pings are answered and a close is acknowledged by the protocol itself."""
        if self.protocol.state is State.CLOSED:
            return False
        try:
            while select.select([self.sock], [], [], 0)[0]:
                data = self.sock.recv(65536)
                if not data:
                    self.protocol.receive_eof()
                    break
                self.protocol.receive_data(data)
        except OSError:
            return False
        self.protocol.events_received()  # messages from the client mean nothing here
        self.flush()
        return self.protocol.state is State.OPEN

    def close(self, code: int = CloseCode.NORMAL_CLOSURE) -> None:
        """Close, and wait a little for the client's close in return (the caller then
        hangs up, as the server side does once the closing handshake is over)."""
        self.protocol.send_close(code)
        self.flush()
        deadline = time.monotonic() + CLOSE_WAIT_SECONDS
        while (
            self.protocol.close_rcvd is None
            and self.protocol.state is not State.CLOSED
            and time.monotonic() < deadline
        ):
            if select.select([self.sock], [], [], 0.05)[0]:
                self.read_incoming()


def accept(
    sock: socket.socket,
    out: io.BufferedIOBase,
    path: str,
    headers: list[tuple[str, str]],
    *,
    subprotocols: list[str] | None = None,
    select_subprotocol: Callable[[ServerProtocol, Sequence[str]], str | None] | None = None,
    chosen: str | None = None,
) -> Conversation | None:
    """Answer the handshake: 101 and the conversation, or the protocol's refusal (an
    invalid handshake, or no subprotocol the server speaks) and None. ``chosen`` is a
    subprotocol the caller picked itself (one the library's token grammar refuses)."""
    protocol = ServerProtocol(
        subprotocols=subprotocols,  # type: ignore[arg-type]
        select_subprotocol=select_subprotocol,  # type: ignore[arg-type]
    )
    # The protocol parses the handshake itself (it then reads frames, not HTTP, from
    # what follows): it is given the request as the client sent it.
    head = "".join(f"{k}: {v}\r\n" for k, v in headers)
    protocol.receive_data(f"GET {path} HTTP/1.1\r\n{head}\r\n".encode("latin-1"))
    request = next((e for e in protocol.events_received() if isinstance(e, Request)), None)
    if request is None:
        response = protocol.reject(
            400, f"Failed to open a WebSocket connection: {protocol.handshake_exc}"
        )
    else:
        response = protocol.accept(request)
        if chosen and response.status_code == 101:
            response.headers["Sec-WebSocket-Protocol"] = chosen
    protocol.send_response(response)
    conversation = Conversation(sock, out, protocol)
    conversation.flush()
    return conversation if response.status_code == 101 else None


def stream_text(conversation: Conversation, look: Look, stop: threading.Event, poll: float) -> None:
    """Send ``look``'s new text every ``poll`` seconds until it ends (then close 1000),
    the client closes or leaves, the source goes (then drop the connection) or ``stop``."""
    sent = 0
    while conversation.read_incoming():
        seen = look(sent)
        if seen is None:
            return
        text, ended = seen
        if text:
            conversation.protocol.send_text(text.encode())
            sent += len(text)
        conversation.flush()
        if ended:
            conversation.close()
            return
        if stop.wait(poll):
            conversation.close(CloseCode.GOING_AWAY)
            return


__all__ = ["Conversation", "Look", "accept", "stream_text"]
