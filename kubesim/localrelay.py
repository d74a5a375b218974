"""The service proxy's way to a real process behind a pod (``localproc.py``): one HTTP
request relayed to a loopback address, or an upgraded connection (a WebSocket) piped.

It does what the API server's proxy does on the wire: the request goes with its method,
path, query and headers, less the hop-by-hop ones and ``Authorization`` (authentication
took it), with ``Host`` the backend's and ``X-Forwarded-For`` the client's. The answer
comes back byte for byte (status, headers, cookies, a chunked body as chunked) on a
connection that closes after it. An upgrade keeps ``Connection``/``Upgrade``; when the
backend answers ``101`` the two connections are piped both ways until either ends.
Nothing here knows what the process is.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable
from io import BufferedIOBase

from kubesim.errors import ApiError
from kubesim.serviceproxy import HOP_BY_HOP

CONNECT_SECONDS = 5.0
_POLL = 0.25
_CHUNK = 64 * 1024
# What the API server does not pass on, and what the relay writes itself.
_DROPPED = HOP_BY_HOP | {"authorization", "content-length", "expect", "host"}


def _request_head(
    method: str,
    target: str,
    address: tuple[str, int],
    headers: list[tuple[str, str]],
    body: bytes,
    client_ip: str,
    upgrade: bool,
) -> bytes:
    lines = [f"{method} {target} HTTP/1.1", f"Host: {address[0]}:{address[1]}"]
    lines += [f"{k}: {v}" for k, v in headers if k.lower() not in _DROPPED]
    lines.append(f"X-Forwarded-For: {client_ip}")
    if upgrade:
        lines += ["Connection: Upgrade", "Upgrade: websocket"]
    else:
        lines.append("Connection: close")
    if body or method in ("POST", "PUT", "PATCH"):
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def relay(
    client: socket.socket,
    client_in: BufferedIOBase,
    address: tuple[str, int],
    *,
    method: str,
    target: str,
    headers: list[tuple[str, str]],
    body: bytes,
    client_ip: str,
    upgrade: bool,
    stopping: Callable[[], bool],
) -> int:
    """Relay one request to ``address`` (``target``: path and query, as sent) and its
    answer to ``client``; the backend's status (0 if it answered nothing). A backend that
    cannot be reached is the API server's 503, raised before anything is written."""
    try:
        upstream = socket.create_connection(address, timeout=CONNECT_SECONDS)
    except OSError as exc:
        raise ApiError(
            503,
            "ServiceUnavailable",
            f"error trying to reach service: dial tcp {address[0]}:{address[1]}: connect: {exc}",
        ) from exc
    with upstream:
        upstream.sendall(
            _request_head(method, target, address, headers, body, client_ip, upgrade) + body
        )
        upstream.settimeout(_POLL)
        status = 0
        first = True
        reader: threading.Thread | None = None
        while not stopping():
            try:
                data = upstream.recv(_CHUNK)
            except TimeoutError:
                continue
            except OSError:
                break
            if not data:
                break
            if first:
                first = False
                status = _status(data)
                if upgrade and status == 101:
                    reader = threading.Thread(
                        target=_pipe_client, args=(client_in, upstream), daemon=True
                    )
                    reader.start()
            try:
                client.sendall(data)
            except OSError:
                break
        with contextlib.suppress(OSError):
            client.shutdown(socket.SHUT_RDWR)
        if reader is not None:
            reader.join(timeout=CONNECT_SECONDS)
    return status


def _status(head: bytes) -> int:
    parts = head.split(b"\r\n", 1)[0].split(b" ", 2)
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0


def _pipe_client(client_in: BufferedIOBase, upstream: socket.socket) -> None:
    """What the client sends after the upgrade, to the backend, until it closes."""
    while True:
        try:
            data = client_in.read1(_CHUNK)
        except (OSError, ValueError):
            data = b""
        if not data:
            with contextlib.suppress(OSError):
                upstream.shutdown(socket.SHUT_WR)
            return
        try:
            upstream.sendall(data)
        except OSError:
            return
