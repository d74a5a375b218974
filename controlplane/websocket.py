"""WebSocket handshakes through Django's views, under the ASGI server.

:class:`WebSocketGate` turns the ASGI ``websocket`` scope into the ``GET`` it is and runs
it through the whole Django stack, so a view decides who may connect exactly as for plain
HTTP. The view answers :class:`WebSocketAccept` (the conversation to hold) or any other
response, which refuses the handshake with that status and body. Only views marked with
:func:`accepts_websocket` are called (and the clusters' own origin, whose middleware
answers all of it); elsewhere a handshake is a 404 before any view runs.
:func:`streaming_body` consumes a blocking streamed response chunk by chunk in a thread.
"""

from __future__ import annotations

import io
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.conf import settings
from django.core.handlers.asgi import ASGIHandler, ASGIRequest, get_script_prefix
from django.http import HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.urls import Resolver404, get_resolver, set_script_prefix

from controlplane.rayorigin import serves_host

Receive = Callable[[], Awaitable[Mapping[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
Conversation = Callable[[Receive, Send], Awaitable[None]]
View = TypeVar("View", bound=Callable[..., Any])

_MARK = "accepts_websocket"
_HANDSHAKE = "_websocket_handshake"


@dataclass(frozen=True)
class Handshake:
    """What the client asked for beyond the ``GET``: the subprotocols it offers."""

    subprotocols: tuple[str, ...]


class WebSocketAccept(HttpResponse):
    """A view's answer that takes the WebSocket: ``conversation`` runs once Django is done
    with the request (the gate sends ``websocket.accept`` only when the conversation
    does, so it may still refuse, e.g. when its own upstream refuses)."""

    def __init__(self, conversation: Conversation) -> None:
        super().__init__(status=101)
        self.conversation = conversation


def accepts_websocket(view: View) -> View:
    """Mark a view as one that takes WebSocket handshakes (see the module)."""
    setattr(view, _MARK, True)
    return view


def handshake(request: HttpRequest) -> Handshake | None:
    """The WebSocket handshake ``request`` is (only the gate sets one), or ``None``."""
    found = getattr(request, _HANDSHAKE, None)
    return found if isinstance(found, Handshake) else None


def streaming_body(request: HttpRequest, chunks: Iterator[bytes]) -> Any:
    """``chunks`` as a streaming response's content for the server that serves ``request``:
    as they are under WSGI; under ASGI each read in the request's thread, one at a time
    (Django would otherwise read a blocking iterator to its end before sending a byte)."""
    if not isinstance(request, ASGIRequest):
        return chunks
    return _each_in_thread(chunks)


async def _each_in_thread(chunks: Iterator[bytes]) -> AsyncIterator[bytes]:
    def read() -> bytes | None:
        return next(chunks, None)

    step = sync_to_async(read, thread_sensitive=True)
    try:
        while (chunk := await step()) is not None:
            yield chunk
    finally:
        close = getattr(chunks, "close", None)
        if close is not None:
            await sync_to_async(close, thread_sensitive=True)()


def _offered_subprotocols(scope: dict[str, Any]) -> tuple[str, ...]:
    return tuple(str(p) for p in scope.get("subprotocols") or ())


def _takes_websocket(path: str, scope: dict[str, Any]) -> bool:
    # The clusters' own origin (RAY_PROXY_ORIGIN) is answered by its middleware, which
    # decides about every path of it (a dashboard's log tail, a notebook's kernels).
    origin = settings.RAY_PROXY_ORIGIN
    host = dict(scope.get("headers") or ()).get(b"host", b"").decode("latin-1")
    if origin and host and serves_host(origin, host):
        return True
    try:
        match = get_resolver().resolve(path)
    except Resolver404:
        return False
    return bool(getattr(match.func, _MARK, False))


class WebSocketGate(ASGIHandler):
    """The ASGI application for ``websocket`` scopes (see the module)."""

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        """One WebSocket connection, from its handshake to its end."""
        async with ThreadSensitiveContext():
            await self._connect(scope, receive, send)

    async def _connect(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        first = await receive()
        if first["type"] != "websocket.connect":
            return
        set_script_prefix(get_script_prefix(scope))
        path = scope["path"].removeprefix(get_script_prefix(scope).rstrip("/"))
        if not _takes_websocket(path, scope):
            await refuse(send, HttpResponse("Not Found", status=404, content_type="text/plain"))
            return
        from django.core import signals

        await signals.request_started.asend(sender=self.__class__, scope=scope)
        secure = scope.get("scheme") == "wss"
        as_http = {
            **scope,
            "type": "http",
            "method": "GET",
            "scheme": "https" if secure else "http",
        }
        request, error = self.create_request(as_http, io.BytesIO())
        response: HttpResponseBase
        if request is None:
            assert error is not None  # Django gives one or the other
            response = error
        else:
            setattr(request, _HANDSHAKE, Handshake(_offered_subprotocols(scope)))
            response = await self.run_get_response(request)
        # Django's part ends here (request_finished: the database connection is given
        # back), before a conversation that may last as long as a job runs.
        await sync_to_async(response.close)()
        if isinstance(response, WebSocketAccept):
            await response.conversation(receive, send)
        else:
            await refuse(send, response)


async def refuse(send: Send, response: HttpResponseBase) -> None:
    """Refuse a handshake with ``response`` (its status, headers and body)."""
    headers = [
        (name.encode("latin1"), str(value).encode("latin1")) for name, value in response.items()
    ]
    headers += [
        (b"Set-Cookie", cookie.output(header="").encode("ascii").strip())
        for cookie in response.cookies.values()
    ]
    body = b"" if response.streaming else bytes(getattr(response, "content", b""))
    await send(
        {
            "type": "websocket.http.response.start",
            "status": response.status_code,
            "headers": headers,
        }
    )
    await send({"type": "websocket.http.response.body", "body": body})


def application(http: Callable[..., Awaitable[None]]) -> Callable[..., Awaitable[None]]:
    """The project's ASGI application: ``http`` (Django's) for HTTP, the gate for
    WebSockets, and the lifespan protocol acknowledged (nothing to start or stop)."""
    gate = WebSocketGate()

    async def serve(scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            await gate(scope, receive, send)
        elif scope["type"] == "lifespan":
            while True:
                event = await receive()
                kind = event["type"].rsplit(".", 1)[-1]
                await send({"type": f"lifespan.{kind}.complete"})
                if kind == "shutdown":
                    return
        else:
            await http(scope, receive, send)

    return serve
