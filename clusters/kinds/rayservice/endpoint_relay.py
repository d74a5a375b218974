"""A service's endpoint: ``/serve/{tenant}/{service}/{route...}`` relayed to the Serve
proxy of its active cluster, through the Kubernetes API's service proxy to KubeRay's
serve service (``<name>-serve-svc``, port ``serve``, 8000), whose selector KubeRay moves
to the new cluster when an upgrade completes: each request reaches whichever cluster
serves then. Any method, body and query pass through; the answer streams. Callers send
a tenant member's API token or one of the service's invoke tokens
(``endpoint_access.py``), or nothing to a public service. Refusals: 401 (no or unknown
token), 404 (no such service for this caller), 403 (another service's invoke token), 503
(not ready, saying why; a scaled-to-zero service is woken and says so), 502 (unreachable).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.request import Request

from clusters.domain.states import State
from clusters.kinds.rayservice import endpoint_counts, scale_to_zero
from clusters.kinds.rayservice.endpoint_access import TOKEN_PREFIX, token_digest, token_used
from clusters.kube.connection import gateway_of
from clusters.kube.gateway import KubeError
from clusters.live.ray_proxy import read_body, refusal, upstream_path
from clusters.models import ClusterRequest, ServiceToken, Workload
from controlplane.api.authentication import TokenAuthentication
from controlplane.api.errors import error_body
from controlplane.websocket import streaming_body
from tenants.models import Tenant
from tenants.selectors import tenant_with_role

SERVE_PORT = "serve"
_SLUG = re.compile(r"[-a-zA-Z0-9_]{1,64}")
_NAME = re.compile(r"[-a-z0-9]{1,63}")
METHODS = frozenset({"GET", "HEAD", "OPTIONS", "POST", "PUT", "PATCH", "DELETE"})
# What identifies the caller to the product, and hop-by-hop headers, stay here.
_KEPT_REQUEST_HEADERS = frozenset(
    {
        "authorization",
        "cookie",
        "host",
        "connection",
        "keep-alive",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "x-csrftoken",
        "content-length",
    }
)
_KEPT_RESPONSE_HEADERS = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "set-cookie", "content-security-policy"}
)


def serve_service(name: str) -> str:
    """KubeRay's serve service of the RayService ``name``."""
    return f"{name}-serve-svc"


@dataclass(frozen=True)
class Credential:
    """What the caller sent: an invoke token, a user (of an API token), or nothing."""

    token: ServiceToken | None = None
    user: Any = None


def _not_found() -> HttpResponse:
    return refusal(404, "not_found", "Not found.")


def _unauthenticated(message: str, code: str = "not_authenticated") -> HttpResponse:
    response = refusal(401, code, message)
    response["WWW-Authenticate"] = "Token"  # as the API's; "Bearer" is accepted too
    return response


def _find(slug: str, name: str) -> ClusterRequest | None:
    """The live service ``name`` of tenant ``slug`` (any caller's view of it); ``None``
    for names no tenant or service can have, before they reach a query."""
    if not (_SLUG.fullmatch(slug) and _NAME.fullmatch(name)):
        return None
    return (
        ClusterRequest.objects.unscoped()
        .not_deleted()
        .filter(tenant__slug=slug, name=name, workload=Workload.SERVICE)
        .select_related("tenant", "service")
        .first()
    )


def _credential(request: HttpRequest) -> Credential | HttpResponse | None:
    """The caller's credential; ``None`` when none was sent, a 401 when it is not one."""
    header = request.headers.get("Authorization", "")
    scheme, _, value = header.partition(" ")
    if not header:
        return None
    if scheme.lower() in ("bearer", "token") and value.startswith(TOKEN_PREFIX):
        token = (
            ServiceToken.objects.filter(digest=token_digest(value.strip()))
            .select_related("service")
            .first()
        )
        if token is None:
            return _unauthenticated(
                "This invoke token is not valid (revoked or mistyped).", "authentication_failed"
            )
        return Credential(token=token)
    try:
        found = TokenAuthentication().authenticate(Request(request))
    except AuthenticationFailed as exc:
        return _unauthenticated(str(exc.detail), "authentication_failed")
    if found is None:
        return _unauthenticated("Send 'Authorization: Bearer <token>'.")
    return Credential(user=found[0])


def _admitted(
    cred: Credential | None, service: ClusterRequest | None, slug: str
) -> HttpResponse | None:
    """The refusal for this caller and service, or ``None`` when it may call it."""
    if service is not None and service.service.public:
        return None
    if cred is None:
        return _unauthenticated(
            "Send a token: 'Authorization: Bearer <token>', an invoke token of the service "
            "or an API token of a member of its tenant."
        )
    if service is None:
        return _not_found()
    if cred.token is not None:
        if cred.token.service_id == service.pk:
            return None
        if (
            ClusterRequest.objects.unscoped()
            .filter(pk=cred.token.service_id, tenant_id=service.tenant_id)
            .exists()
        ):
            return refusal(
                403,
                "permission_denied",
                f"This token invokes another service, not {service.name}.",
            )
        return _not_found()
    found: tuple[Tenant, str | None] | None = tenant_with_role(user=cred.user, slug=slug)
    return None if found is not None else _not_found()


def not_ready(service: ClusterRequest) -> HttpResponse:
    """The 503 of a service that cannot answer now, saying why."""
    why = f"{service.name} is {service.get_state_display().lower()}"
    if service.state == State.QUEUED and service.queue_reason:
        why += f" ({service.queue_reason})"
    elif service.last_error:
        why += f": {service.last_error[:300]}"
    response = refusal(503, "not_ready", f"{why}; its endpoint answers once it is ready.")
    response["Retry-After"] = "10"
    return response


# What a waking service's 503 asks its caller to wait before trying again, in seconds.
WAKING_RETRY_AFTER = 10
WAKING_STATES = frozenset({State.QUEUED, State.ADMITTED, State.STARTING})


def waking(service: ClusterRequest) -> HttpResponse:
    """The 503 of a service woken from zero that is not serving yet: it is coming up (a
    cold start), or waits in the queue (its position and reason)."""
    if service.state == State.QUEUED:
        stands = "waits in the queue for its GPUs"
        if service.queue_message:
            stands += f" ({service.queue_message[:300]})"
    else:
        stands = "is starting its Ray cluster and Serve applications"
    body = error_body(
        "waking",
        f"{service.name} was scaled to zero and is waking up (cold start): it {stands}. "
        "Its endpoint answers 503 until it is ready; retry after "
        f"{WAKING_RETRY_AFTER} s.",
    )
    body["error"].update(
        state=service.state,
        cold_start=True,
        woken_at=service.service.woken_at.isoformat() if service.service.woken_at else None,
        queue={
            "position": service.queue_position,
            "reason": service.queue_reason,
            "message": service.queue_message,
            "eta": service.queue_eta.isoformat() if service.queue_eta else None,
        }
        if service.state == State.QUEUED
        else None,
    )
    response = JsonResponse(body, status=503)
    response["Retry-After"] = str(WAKING_RETRY_AFTER)
    return response


def _unready(service: ClusterRequest) -> HttpResponse:
    """The 503 of a service that is not ready; the request wakes a scaled-to-zero one."""
    if service.state == State.SUSPENDED:
        service = scale_to_zero.wake(service)
        service.service.refresh_from_db(fields=["woken_at"])
    if service.state in WAKING_STATES and service.service.woken_at is not None:
        return waking(service)
    return not_ready(service)


def relay(request: HttpRequest, *, slug: str, name: str, path: str) -> HttpResponseBase:
    """Forward ``request`` to the service's Serve proxy at ``/{path}`` (see the module)."""
    method = request.method or "GET"
    if method not in METHODS:
        return refusal(405, "method_not_allowed", f"The endpoint does not forward {method}.")
    cred = _credential(request)
    if isinstance(cred, HttpResponse):
        return cred
    service = _find(slug, name)
    refused = _admitted(cred, service, slug)
    if refused is not None:
        return refused
    assert service is not None  # _admitted refuses an unknown service
    if service.state != State.READY:
        return _unready(service)
    target = upstream_path(path)
    if target is None:
        return refusal(400, "bad_path", "The path may not contain '.' or '..' segments.")
    body = read_body(request)
    if isinstance(body, HttpResponse):
        return body
    headers = {k: v for k, v in request.headers.items() if k.lower() not in _KEPT_REQUEST_HEADERS}
    try:
        answer = gateway_of(service).service_proxy(
            method,
            service.namespace,
            serve_service(service.name),
            SERVE_PORT,
            target,
            query=request.META.get("QUERY_STRING", ""),
            headers=headers,
            body=body,
            timeout=settings.RAY_PROXY_READ_TIMEOUT_SECONDS,
        )
    except KubeError as exc:
        return refusal(
            502,
            "service_unreachable",
            f"The Serve proxy of {service.name} could not be reached through the "
            f"Kubernetes API: {exc.message}",
        )
    endpoint_counts.request_counted(service.pk)
    if cred is not None and cred.token is not None:
        token_used(cred.token)
    return _relayed(request, answer)


def _relayed(request: HttpRequest, answer: Any) -> StreamingHttpResponse:
    """The Serve proxy's answer, streamed, with its headers (less hop-by-hop ones and
    cookies: the product's origin keeps its own)."""
    response = StreamingHttpResponse(streaming_body(request, answer.chunks()), status=answer.status)
    for header, value in answer.headers.items():
        if header not in _KEPT_RESPONSE_HEADERS:
            response[header] = value
    response["X-Content-Type-Options"] = "nosniff"
    return response
