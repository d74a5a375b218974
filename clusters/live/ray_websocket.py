"""WebSockets through the Ray dashboard proxy (Ray's log tail, ``/api/jobs/{id}/logs/tail``).

The handshake is decided by the HTTP path (:func:`~clusters.live.ray_proxy.relay` and its
checks), which answers :func:`accept`. The upstream socket goes through the Kubernetes
API's service proxy with the headers the HTTP relay forwards; its refusal is relayed
with its status and body, an unreachable one is a 502, and a redirect is never
followed. Messages pass both ways as they are, each side read only as fast as the other
takes them (no unbounded buffer); a close is passed on with its code, a lost connection
as 1014 to the client and 1001 to the dashboard.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from django.conf import settings
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus
from websockets.frames import EXTERNAL_CLOSE_CODES, CloseCode

from clusters.kube.gateway import UpgradeTarget
from controlplane.api.errors import error_body
from controlplane.websocket import Handshake, Receive, Send, WebSocketAccept, refuse

# Ray's own client reads messages of up to 4 MiB (aiohttp's default); a log frame is at
# most a few tens of kilobytes.
MAX_MESSAGE_BYTES = 4 * 1024 * 1024
_LOST_UPSTREAM = int(CloseCode.BAD_GATEWAY)
_LOST_CLIENT = int(CloseCode.GOING_AWAY)


class _connect_without_redirects(connect):
    """``websockets``' client, answering a redirect as the refusal it is: the proxy
    reaches the dashboard and nothing else."""

    def process_redirect(self, exc: Exception) -> Exception | str:
        return exc


def accept(handshake: Handshake, target: UpgradeTarget, *, cluster_name: str) -> WebSocketAccept:
    """The proxy's answer to a handshake it allowed: relay a WebSocket to ``target``."""

    async def conversation(receive: Receive, send: Send) -> None:
        await _relay(handshake, target, cluster_name, receive, send)

    return WebSocketAccept(conversation)


def _sendable(code: int) -> bool:
    """Whether a close frame may carry ``code`` (1005, 1006, 1015 are never sent)."""
    return code in EXTERNAL_CLOSE_CODES or 3000 <= code < 5000


async def _relay(
    handshake: Handshake, target: UpgradeTarget, cluster_name: str, receive: Receive, send: Send
) -> None:
    try:
        upstream = await _connect_without_redirects(
            target.url,
            additional_headers=target.headers,
            ssl=target.ssl,
            subprotocols=list(handshake.subprotocols) or None,  # type: ignore[arg-type]
            open_timeout=settings.RAY_PROXY_READ_TIMEOUT_SECONDS,
            max_size=MAX_MESSAGE_BYTES,
            compression=None,
            user_agent_header=None,
            proxy=None,
        )
    except InvalidStatus as refused:
        await _refuse_as_upstream(send, refused)
        return
    except (OSError, TimeoutError, InvalidHandshake) as exc:
        await _refuse_unreachable(send, cluster_name, exc)
        return
    async with upstream:
        await send({"type": "websocket.accept", "subprotocol": upstream.subprotocol})
        inbound = asyncio.create_task(_client_to_upstream(receive, upstream))
        outbound = asyncio.create_task(_upstream_to_client(upstream, send))
        _, pending = await asyncio.wait({inbound, outbound}, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)


async def _client_to_upstream(receive: Receive, upstream: ClientConnection) -> None:
    while True:
        message = await receive()
        if message["type"] == "websocket.disconnect":
            code = int(message.get("code") or CloseCode.NORMAL_CLOSURE)
            reason = str(message.get("reason") or "")
            await upstream.close(code if _sendable(code) else _LOST_CLIENT, reason)
            return
        if message["type"] != "websocket.receive":
            continue
        data = message.get("text")
        try:
            await upstream.send(data if data is not None else message.get("bytes") or b"")
        except ConnectionClosed:
            return  # the upstream's close reaches the client through the other task


async def _upstream_to_client(upstream: ClientConnection, send: Send) -> None:
    try:
        async for data in upstream:
            if isinstance(data, str):
                await send({"type": "websocket.send", "text": data})
            else:
                await send({"type": "websocket.send", "bytes": bytes(data)})
    except ConnectionClosed:
        pass
    received = upstream.protocol.close_rcvd
    if received is None:
        code, reason = _LOST_UPSTREAM, "The Ray dashboard's connection was lost."
    else:
        code = received.code if _sendable(received.code) else int(CloseCode.NORMAL_CLOSURE)
        reason = received.reason
    await send({"type": "websocket.close", "code": code, "reason": reason})


async def _refuse_as_upstream(send: Send, refused: InvalidStatus) -> None:
    from django.http import HttpResponse

    answer = refused.response
    response = HttpResponse(
        bytes(answer.body or b""),
        status=answer.status_code,
        content_type=answer.headers.get("Content-Type", "text/plain"),
    )
    response["X-Content-Type-Options"] = "nosniff"
    await refuse(send, response)


async def _refuse_unreachable(send: Send, cluster_name: str, exc: Exception) -> None:
    from django.http import HttpResponse

    body: dict[str, Any] = error_body(
        "dashboard_unreachable",
        f"The Ray dashboard of {cluster_name} could not be reached through the Kubernetes "
        f"API: {exc}",
    )
    await refuse(send, HttpResponse(json.dumps(body), status=502, content_type="application/json"))
