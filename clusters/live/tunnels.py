"""Tunnels: one TCP connection to a port of a cluster's head pod, over a WebSocket of
the product (``gangway port-forward``, ``gangway ssh``).

Who: the cluster's owner and the tenant's admins (those who manage it), on a ready
cluster; the SSH port only on a cluster asked for with ``ssh: true``. The way to the pod
is Kubernetes' own ``pods/portforward`` (WebSocket, ``v4.channel.k8s.io``) through the
gateway's credentials. Towards the client, a binary message is bytes of the connection
and a text message is the product's word on why it ends (the pod's port refused, the
head went). Each tunnel is a :class:`~clusters.models.Tunnel` row, audited when it opens
and closes (who, cluster, port, bytes each way), and counts as use of the cluster while
open (:mod:`clusters.engine.tunnel_activity`).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import transaction
from django.http import HttpResponse
from django.utils import timezone
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus
from websockets.frames import CloseCode

from clusters.domain.states import State
from clusters.engine import idle
from clusters.engine.tunnel_activity import HEARTBEAT_SECONDS
from clusters.kube.connection import gateway_of
from clusters.kube.gateway import KubeError
from clusters.kube.ssh import SSH_PORT
from clusters.models import ClusterRequest, Tunnel
from clusters.requests import rules
from controlplane.api.errors import error_body
from controlplane.websocket import Receive, Send, WebSocketAccept, refuse
from tenants.audit import audit_record

PORTFORWARD_PROTOCOL = "v4.channel.k8s.io"
MAX_MESSAGE_BYTES = 1 << 20
PURPOSES = ("port-forward", "ssh")


@dataclass(frozen=True)
class Refusal:
    """Why a tunnel is not opened: an HTTP status, a stable code and a message."""

    status: int
    code: str
    message: str

    def response(self) -> HttpResponse:
        """The refusal as the API's error body."""
        body = json.dumps(error_body(self.code, self.message))
        return HttpResponse(body, status=self.status, content_type="application/json")


def refusal(*, user: Any, cluster: ClusterRequest, role: str | None, port: int) -> Refusal | None:
    """Why ``user`` may not open a tunnel to ``port`` of ``cluster`` (None: they may)."""
    if not rules.can_manage(actor=user, cluster=cluster, role=role):
        return Refusal(
            403,
            "permission_denied",
            f"Tunnels to {cluster.name} are for its owner ({cluster.owner.get_username()}) "
            f"and the admins of {cluster.tenant.name}; your role there is {role or 'none'}.",
        )
    if not 0 < port < 65536:
        return Refusal(400, "invalid", "Give the head's TCP port as ?port=N (1-65535).")
    if cluster.state != State.READY:
        return Refusal(
            409,
            "invalid_state",
            f"{cluster.name} is {cluster.state}: tunnels open to ready clusters only.",
        )
    if port == SSH_PORT and not cluster.ssh:
        return Refusal(
            409,
            "ssh_not_enabled",
            f"{cluster.name} was not created with SSH: request a cluster with ssh: true "
            "(gangway up --ssh) to reach it with gangway ssh.",
        )
    return None


def head_pod(cluster: ClusterRequest) -> str | None:
    """The name of the cluster's running head pod, if there is one."""
    pods = gateway_of(cluster).list(
        "v1",
        "Pod",
        namespace=cluster.namespace,
        label_selector=f"ray.io/cluster={cluster.name},ray.io/node-type=head",
    )
    running = [
        p
        for p in pods
        if (p.get("status") or {}).get("phase") == "Running"
        and not p["metadata"].get("deletionTimestamp")
    ]
    return str(running[0]["metadata"]["name"]) if running else None


def _opened(cluster: ClusterRequest, user: Any, port: int, purpose: str) -> Tunnel:
    with transaction.atomic():
        tunnel = Tunnel.objects.create(
            cluster=cluster, user=user, username=user.get_username(), port=port, purpose=purpose
        )
        audit_record(
            actor=user,
            action="tunnel.open",
            obj=cluster,
            tenant=cluster.tenant,
            data={"tunnel": tunnel.pk, "port": port, "purpose": purpose},
        )
    idle.mark_used(cluster.pk, tunnel.opened_at)
    return tunnel


def _touched(tunnel: Tunnel) -> None:
    Tunnel.objects.filter(pk=tunnel.pk).update(
        seen_at=timezone.now(), bytes_in=tunnel.bytes_in, bytes_out=tunnel.bytes_out
    )


def _closed(tunnel: Tunnel, cluster: ClusterRequest, user: Any, reason: str) -> None:
    now = timezone.now()
    with transaction.atomic():
        Tunnel.objects.filter(pk=tunnel.pk).update(
            closed_at=now,
            seen_at=now,
            bytes_in=tunnel.bytes_in,
            bytes_out=tunnel.bytes_out,
            close_reason=reason[:300],
        )
        audit_record(
            actor=user,
            action="tunnel.close",
            obj=cluster,
            tenant=cluster.tenant,
            data={
                "tunnel": tunnel.pk,
                "port": tunnel.port,
                "purpose": tunnel.purpose,
                "bytes_in": tunnel.bytes_in,
                "bytes_out": tunnel.bytes_out,
                "seconds": round((now - tunnel.opened_at).total_seconds(), 1),
                "reason": reason[:200],
            },
        )
    idle.mark_used(cluster.pk, now)


def accept(*, cluster: ClusterRequest, user: Any, port: int, purpose: str) -> WebSocketAccept:
    """The answer to an allowed handshake: relay one connection to the head's ``port``."""

    async def conversation(receive: Receive, send: Send) -> None:
        await _Relay(cluster, user, port, purpose).run(receive, send)

    return WebSocketAccept(conversation)


class _Relay:
    """One tunnel's conversation (see the module)."""

    def __init__(self, cluster: ClusterRequest, user: Any, port: int, purpose: str) -> None:
        self.cluster = cluster
        self.user = user
        self.port = port
        self.purpose = purpose
        self.reason = "closed by the client"

    async def _open_upstream(self, send: Send) -> ClientConnection | None:
        cluster = self.cluster
        try:
            pod = await sync_to_async(head_pod)(cluster)
        except KubeError as exc:
            pod, why = None, f"the head pod could not be listed: {exc}"
        else:
            why = "its head pod is not running"
        if pod is None:
            await refuse(
                send, Refusal(409, "head_not_running", f"{cluster.name}: {why}.").response()
            )
            return None
        gateway = await sync_to_async(gateway_of)(cluster)  # reads its member's row
        path = f"/api/v1/namespaces/{cluster.namespace}/pods/{pod}/portforward?ports={self.port}"
        target = gateway.upgrade(path)
        try:
            upstream = await connect(
                target.url,
                additional_headers=target.headers,
                ssl=target.ssl,
                subprotocols=[PORTFORWARD_PROTOCOL],  # type: ignore[list-item]
                open_timeout=settings.RAY_PROXY_READ_TIMEOUT_SECONDS,
                max_size=MAX_MESSAGE_BYTES,
                compression=None,
                user_agent_header="gangway",
                proxy=None,
            )
        except InvalidStatus as exc:
            body = bytes(exc.response.body or b"").decode(errors="replace")[:300]
            message = f"Kubernetes refused the port-forward to {pod}: {body}"
            await refuse(send, Refusal(502, "tunnel_refused", message).response())
            return None
        except (OSError, TimeoutError, InvalidHandshake) as exc:
            message = f"The Kubernetes API could not be reached for {cluster.name}: {exc}"
            await refuse(send, Refusal(502, "tunnel_unreachable", message).response())
            return None
        return upstream

    async def run(self, receive: Receive, send: Send) -> None:
        """Open the way to the pod, accept the client, relay both ways, record it."""
        upstream = await self._open_upstream(send)
        if upstream is None:
            return
        tunnel = await sync_to_async(_opened)(self.cluster, self.user, self.port, self.purpose)
        await send({"type": "websocket.accept"})
        self.tunnel = tunnel
        async with upstream:
            tasks = {
                asyncio.create_task(self._from_client(receive, upstream)),
                asyncio.create_task(self._from_pod(upstream, send)),
                asyncio.create_task(self._heartbeat()),
            }
            _, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        await sync_to_async(_closed)(tunnel, self.cluster, self.user, self.reason)

    async def _from_client(self, receive: Receive, upstream: ClientConnection) -> None:
        while True:
            message = await receive()
            if message["type"] == "websocket.disconnect":
                self.reason = "closed by the client"
                return
            data = message.get("bytes")
            if message["type"] != "websocket.receive" or not data:
                continue
            try:
                await upstream.send(b"\x00" + data)
            except ConnectionClosed:
                return
            self.tunnel.bytes_in += len(data)

    async def _from_pod(self, upstream: ClientConnection, send: Send) -> None:
        seen: set[int] = set()
        try:
            async for frame in upstream:
                data = frame.encode() if isinstance(frame, str) else bytes(frame)
                if not data:
                    continue
                channel, payload = data[0], data[1:]
                if channel not in seen:
                    seen.add(channel)  # the first frame of a channel names its port
                    continue
                if channel == 0:
                    await send({"type": "websocket.send", "bytes": payload})
                    self.tunnel.bytes_out += len(payload)
                elif channel == 1 and payload:
                    self.reason = payload.decode(errors="replace")
                    await send({"type": "websocket.send", "text": self.reason})
        except ConnectionClosed:
            pass
        if self.reason == "closed by the client":
            self.reason = f"port {self.port} of the head closed the connection"
        await send({"type": "websocket.close", "code": int(CloseCode.NORMAL_CLOSURE)})

    async def _heartbeat(self) -> None:
        while True:
            await asyncio.sleep(HEARTBEAT_SECONDS)
            await sync_to_async(_touched)(self.tunnel)
