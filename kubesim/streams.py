"""The streamed answers of kubesim's API server: a followed ``pods/log`` and a watch.

Both are chunked HTTP bodies written by the request's handler thread. The cluster's lock
is held only to read what to send next, never while writing, so a slow client holds up
nobody; both end when their subject does, the client leaves or kubesim stops.
"""

from __future__ import annotations

import io
import select
import socket
import time
from email.message import Message
from math import inf
from typing import Any, Protocol

from kubesim import podlogs, watch
from kubesim.errors import ApiError
from kubesim.faults import Seen


class Handler(Protocol):
    """What a stream needs of the request's handler (``server.Handler``, which imports
    this module: a protocol keeps the two out of an import cycle)."""

    server: Any  # server.Server: its ``sim`` and whether it is ``closed``
    headers: Message
    wfile: io.BufferedIOBase
    connection: socket.socket
    close_connection: bool
    _seen: Seen | None
    _reset: bool

    def send_response(self, code: int, message: str | None = None) -> None: ...
    def send_header(self, keyword: str, value: str) -> None: ...
    def end_headers(self) -> None: ...
    def _cut(self) -> None: ...
    def _send(
        self,
        code: int,
        body: Any,
        headers: dict[str, str] | None = None,
        content_type: str = "application/json",
    ) -> None: ...


# How often an idle watch wakes to notice a client that left or kubesim stopping.
_WATCH_POLL = 0.25
# How long a watch whose connection is to be reset (an injected RESET) streams first.
_WATCH_CUT_SECONDS = 0.5


def pod_log(h: Handler, ns: str, name: str, params: dict[str, str]) -> None:
    """``pods/log``: one text/plain answer, or with ``follow`` a chunked stream that
    polls for new lines (the lock is held only for each read, so other requests go on)
    until the container terminates, the pod goes, the client leaves or kubesim stops."""
    cluster = h.server.sim.cluster
    opts = podlogs.LogOptions.parse(name, params)
    with cluster.lock:
        first = podlogs.read(cluster, ns, name, opts)
    budget = opts.limit_bytes
    body = first.body if budget is None else first.body[:budget]
    if not opts.follow:
        return h._send(200, body, content_type="text/plain")
    h.send_response(200)
    h.send_header("Content-Type", "text/plain")
    h.send_header("Transfer-Encoding", "chunked")
    h.send_header("Cache-Control", "no-cache, private")
    h.end_headers()
    h.close_connection = True
    seen, done = first.seen, first.done
    if budget is not None:
        budget -= len(body)
    _chunk(h, body)
    stop = h.server.sim.stopping
    while not done and (budget is None or budget > 0) and not stop.wait(0.1):
        if _client_gone(h):
            return
        try:
            with cluster.lock:
                more = podlogs.read(cluster, ns, name, opts, seen)
        except ApiError:
            break  # the pod is gone
        seen, done = more.seen, more.done
        data = more.body if budget is None else more.body[:budget]
        if budget is not None:
            budget -= len(data)
        _chunk(h, data)
    h.wfile.write(b"0\r\n\r\n")
    h.wfile.flush()


def watch_stream(h: Handler, rt: Any, version: str, ns: str | None, params: dict[str, str]) -> None:
    """A watch: the query checked (errors answered as usual), then a chunked stream
    of event lines until ``timeoutSeconds`` (or the API server's 30 to 60 minutes),
    an ERROR event, kubesim stopping or the client leaving. Events are encoded under
    the cluster's lock and written after it is released, so a slow client holds up
    nobody."""
    sim = h.server.sim
    cluster = sim.cluster
    opts = watch.parse_options(rt, params)
    accept = h.headers.get("Accept") or ""
    stream = watch.WatchStream(
        cluster,
        rt,
        version,
        ns,
        opts,
        table="as=Table" in accept,
        include=params.get("includeObject") or "Metadata",
    )
    start = time.monotonic()
    deadline = start + opts.timeout
    with cluster.lock:
        frames = stream.open()
        if h._seen is not None and h._seen.code == 410:
            frames = stream.expire()
    if h._reset:
        # Cut a moment after it opened: events may be on their way, the end never is.
        deadline = min(deadline, start + _WATCH_CUT_SECONDS)
    breaks = sim.watch_breaks
    h.send_response(200)
    h.send_header("Content-Type", "application/json")
    h.send_header("Transfer-Encoding", "chunked")
    h.send_header("Cache-Control", "no-cache, private")
    h.end_headers()
    h.close_connection = True
    interval = sim.watch_bookmark_interval
    bookmark_at = watch.next_bookmark(start, deadline, interval) if opts.bookmarks else inf
    with sim.watch_opened():
        try:
            _chunk(h, b"".join(frames))
            while not stream.ended and not _watch_over(h, deadline):
                if sim.watch_breaks != breaks:  # break_watches(): cut without an end
                    h._reset = True
                    break
                with cluster.lock:
                    cluster.expire_events()
                    frames = stream.drain()
                    if not frames and not stream.ended:
                        until = min(deadline, bookmark_at) - time.monotonic()
                        stream.wait(max(0.0, min(until, _WATCH_POLL)))
                        frames = stream.drain()
                    now = time.monotonic()
                    if now >= bookmark_at and not stream.ended:
                        frames.append(stream.bookmark())
                        bookmark_at = watch.next_bookmark(now, deadline, interval)
                if frames:
                    _chunk(h, b"".join(frames))
                elif _client_gone(h):
                    return
            if h._reset:
                h._cut()
                return
            h.wfile.write(b"0\r\n\r\n")
            h.wfile.flush()
        except OSError:
            return  # the client went while we wrote


def _watch_over(h: Handler, deadline: float) -> bool:
    """Past the watch's deadline, or kubesim stopping (or stopped)."""
    return time.monotonic() >= deadline or h.server.sim.stopping.is_set() or h.server.closed


def _client_gone(h: Handler) -> bool:
    """The client closed its end (a quiet follow writes nothing that would notice)."""
    try:
        readable, _, _ = select.select([h.connection], [], [], 0)
        return bool(readable) and not h.connection.recv(1, socket.MSG_PEEK)
    except OSError:
        return True


def _chunk(h: Handler, data: bytes) -> None:
    if data:
        h.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
    h.wfile.flush()
