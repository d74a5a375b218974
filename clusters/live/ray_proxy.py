"""The authenticated reverse proxy to a cluster's Ray dashboard.

The dashboard's route under ``/t/...`` (signed in) and ``/api/v1/...`` (a token) end here
once their view has decided who may see the cluster. :func:`relay` refuses a path
climbing out of the proxy (the control plane's credentials must reach only the
dashboard), a body over ``RAY_PROXY_MAX_BODY_MB`` and a route off ``ray_routes.py``'s
allow-list; forwards only allowed headers both ways (never the session cookie, CSRF
token or ``Authorization``); streams the answer; hands WebSockets to ``ray_websocket.py``;
audits once per session and counts a visit as activity (a person looking is use).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from urllib.parse import quote, unquote

from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.utils import timezone
from django.utils.html import escape

from clusters.domain.states import State
from clusters.engine import idle
from clusters.kube.connection import gateway_of
from clusters.kube.gateway import KubeError
from clusters.kube.raydash import DASHBOARD_PORT_NAME, head_service
from clusters.live import ray_websocket
from clusters.live.ray_routes import CHANGES_CLUSTER, route_refusal
from clusters.models import ClusterRequest
from clusters.requests import rules
from clusters.selectors import cluster_list
from controlplane.api.errors import error_body
from controlplane.websocket import handshake, streaming_body
from tenants.audit import audit_record
from tenants.selectors import is_platform_admin, tenant_with_role

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
METHODS = SAFE_METHODS | {"POST", "PUT", "PATCH", "DELETE"}
# What a browser or Ray's SDK needs the dashboard to see; nothing that identifies the
# caller to the product (Cookie, Authorization, X-CSRFToken) is on the list.
_FORWARDED_REQUEST_HEADERS = (
    "accept",
    "accept-encoding",
    "accept-language",
    "cache-control",
    "content-type",
    "if-modified-since",
    "if-none-match",
    "range",
    "user-agent",
    "x-requested-with",
)
_RELAYED_RESPONSE_HEADERS = (
    "accept-ranges",
    "cache-control",
    "content-disposition",
    "content-encoding",
    "content-length",
    "content-range",
    "etag",
    "expires",
    "last-modified",
    "retry-after",
)
AUDIT_ACTION = "cluster.dashboard_opened"
_AUDIT_PERIOD = timedelta(hours=12)
_ACTIVITY_PERIOD = timedelta(minutes=1)


@dataclass(frozen=True)
class Caller:
    """Who is proxying: the user, their role in the cluster's tenant, and the session
    (``via`` ``browser`` or ``api``; ``session`` a key naming the sign-in or token)."""

    user: Any
    role: str | None
    via: str
    session: str


def refusal(status: int, code: str, message: str) -> HttpResponse:
    """A refusal as the API words one: ``{"error": {"code", "message"}}``."""
    return JsonResponse(error_body(code, message), status=status)


def same_origin(request: HttpRequest, origin: str | None = None) -> bool:
    """Whether the browser says the request came from ``origin`` (default: the request's
    own scheme and host): ``Sec-Fetch-Site: same-origin``, or, from a browser that does
    not send it, a matching ``Origin``. The CSRF defence of the browser routes, whose
    callers (Ray's UI) send no Django CSRF token."""
    site = request.headers.get("Sec-Fetch-Site")
    if site is not None:
        return site == "same-origin"
    given = request.headers.get("Origin")
    return given is not None and given == (origin or f"{request.scheme}://{request.get_host()}")


def role_label(caller: Caller, cluster: ClusterRequest) -> str:
    """The caller's standing on the cluster in words, for a refusal."""
    if is_platform_admin(caller.user):
        return "a platform admin"
    if caller.role == "admin":
        return "a tenant admin"
    if caller.role == "engineer":
        owner = cluster.owner_id == caller.user.pk
        return "the engineer who owns it" if owner else "an engineer who does not own it"
    return f"a {caller.role or 'non-member'}"


def route_refused(request: HttpRequest, message: str) -> HttpResponse:
    """The 403 of a route off the allow-list: HTML for a browser's page load, else JSON."""
    accept = request.headers.get("Accept", "")
    if "text/html" in accept and "json" not in accept:
        page = (
            '<!doctype html><html lang="en"><head><meta charset="utf-8">'
            "<title>Not allowed</title></head><body><h1>403: not allowed</h1>"
            f"<p>{escape(message)}</p></body></html>"
        )
        return HttpResponse(page, status=403, content_type="text/html; charset=utf-8")
    return refusal(403, "permission_denied", message)


def visible_cluster(*, user: Any, slug: str, name: str) -> tuple[ClusterRequest, str | None]:
    """The live cluster ``name`` of tenant ``slug`` as ``user`` sees it, and their role.

    Another tenant's cluster, an unknown one and a deleted one are the same 404, so the
    proxy never confirms that anything exists beyond what the user may see (STYLE 3).
    """
    found = tenant_with_role(user=user, slug=slug)
    if found is None:
        raise Http404(f"You are not a member of a tenant called {slug!r}.")
    tenant, role = found
    cluster = cluster_list(tenant=tenant).not_deleted().filter(name=name).first()
    if cluster is None:
        raise Http404(f"{tenant.name} has no cluster named {name!r}.")
    return cluster, role


def upstream_path(path: str) -> str | None:
    """The dashboard path to forward, URL-encoded; ``None`` when it climbs out of the proxy.

    Django hands views the decoded path, so ``%2e%2e`` arrives as ``..`` and is refused
    with the literal form. A backslash is refused too: some servers read it as a slash.
    """
    decoded = unquote(path)
    if "\\" in decoded or "\x00" in decoded:
        return None
    if any(part in (".", "..") for part in decoded.split("/")):
        return None
    return quote(decoded, safe="/:@!$&'()*+,;=-._~")


def forwarded_headers(
    request: HttpRequest, base: str, more: tuple[str, ...] = ()
) -> dict[str, str]:
    """The allow-listed request headers (and ``more``) for the cluster, with the prefix."""
    headers = {
        name: value
        for name in (*_FORWARDED_REQUEST_HEADERS, *more)
        if (value := request.headers.get(name))
    }
    # Where the dashboard is mounted, for an app that builds links (the convention of
    # proxies that serve an app under a prefix).
    headers["X-Forwarded-Prefix"] = base.rstrip("/")
    return headers


def read_body(request: HttpRequest) -> bytes | HttpResponse | None:
    """The body to forward (``None`` when empty), or the 413 of one over the limit."""
    limit = settings.RAY_PROXY_MAX_BODY_MB * 1024 * 1024
    declared = request.headers.get("Content-Length") or "0"
    too_big = refusal(
        413,
        "body_too_large",
        f"The proxy forwards bodies of at most {settings.RAY_PROXY_MAX_BODY_MB} MiB "
        "(RAY_PROXY_MAX_BODY_MB).",
    )
    if declared.isdigit() and int(declared) > limit:
        return too_big
    # Read from the stream, not ``request.body``: Django caps that at
    # DATA_UPLOAD_MAX_MEMORY_SIZE, which is for forms, not for uploads to Ray.
    body = request.read(limit + 1)
    if len(body) > limit:
        return too_big
    return body or None


def relayed(
    request: HttpRequest, answer: Any, base: str, *, rebase_location: bool = True
) -> StreamingHttpResponse:
    """The backend's answer as a stream with the allow-listed headers; a path-absolute
    ``Location`` goes under ``base`` unless the backend already knows its prefix
    (``rebase_location`` false)."""
    response = StreamingHttpResponse(streaming_body(request, answer.chunks()), status=answer.status)
    response["Content-Type"] = answer.headers.get("content-type", "application/octet-stream")
    for name in _RELAYED_RESPONSE_HEADERS:
        if name in answer.headers:
            response[name] = answer.headers[name]
    location = answer.headers.get("location")
    if location:
        rebased = rebase_location and location.startswith("/")
        response["Location"] = base + location[1:] if rebased else location
    response["X-Content-Type-Options"] = "nosniff"
    return response


def record_session(
    caller: Caller, cluster: ClusterRequest, path: str, action: str = AUDIT_ACTION
) -> None:
    """One ``action`` audit event per sign-in (or token) and cluster every twelve hours,
    and a touch of the cluster's activity at most once a minute."""
    digest = hashlib.sha256(caller.session.encode()).hexdigest()[:16]
    key = f"rayproxy:audit:{action}:{cluster.pk}:{caller.user.pk}:{digest}"
    if cache.add(key, 1, timeout=int(_AUDIT_PERIOD.total_seconds())):
        with transaction.atomic():
            audit_record(
                actor=caller.user,
                action=action,
                obj=cluster,
                tenant=cluster.tenant,
                data={"via": caller.via, "path": "/" + path[:200]},
            )
    if cache.add(f"rayproxy:active:{cluster.pk}", 1, timeout=int(_ACTIVITY_PERIOD.total_seconds())):
        idle.mark_used(cluster.pk, timezone.now())


def relay(
    request: HttpRequest, *, cluster: ClusterRequest, caller: Caller, path: str, base: str
) -> HttpResponseBase:
    """Forward ``request`` to the cluster's Ray dashboard at ``path`` and relay the answer.

    ``base`` is the proxy's own URL prefix (ending in ``/``), for rewritten redirects.
    Refusals are JSON ``{"error": {"code", "message"}}`` like the rest of the API.
    """
    method = request.method or "GET"
    if method not in METHODS:
        return refusal(405, "method_not_allowed", f"The proxy does not forward {method}.")
    target = upstream_path(path)
    if target is None:
        return refusal(400, "bad_path", "The path may not contain '.' or '..' segments.")
    # The route is judged on the path exactly as it is forwarded (decoded once more than
    # Django did: upstream_path decodes what Django left encoded, and sends that).
    route = unquote(target)
    can_manage = rules.can_manage(actor=caller.user, cluster=cluster, role=caller.role)
    refused = route_refusal(method=method, path=route, can_manage=can_manage)
    if refused is not None:
        message = f"{method} /{route} is not allowed for {role_label(caller, cluster)} of "
        message += f"{cluster.name}: {refused}."
        if refused == CHANGES_CLUSTER:
            message += (
                f" Only {cluster.owner.get_username()} and the tenant's admins may; you may "
                "look at its dashboard."
            )
        return route_refused(request, message)
    if cluster.state != State.READY:
        return refusal(
            409,
            "not_ready",
            f"{cluster.name} is {cluster.get_state_display().lower()}; its Ray dashboard can "
            "be reached once it is ready.",
        )
    answer = forward(
        request,
        cluster=cluster,
        caller=caller,
        to=(DASHBOARD_PORT_NAME, target),
        headers=forwarded_headers(request, base),
        audit=(target, AUDIT_ACTION),
        unreachable=("dashboard_unreachable", f"The Ray dashboard of {cluster.name}"),
    )
    if isinstance(answer, HttpResponseBase):
        return answer  # a refusal, or the WebSocket relay
    return relayed(request, answer, base)


def forward(
    request: HttpRequest,
    *,
    cluster: ClusterRequest,
    caller: Caller,
    to: tuple[str, str],
    headers: dict[str, str],
    audit: tuple[str, str],
    unreachable: tuple[str, str],
) -> Any:
    """Send an allowed ``request`` to ``to`` (the head service's port name, the path) once
    its body is read and the session audited (``audit``: the path and action recorded).

    The answer to relay, or a response to return as it is: the 413 of a body over the
    limit, the 502 when the head cannot be reached (``unreachable``: its code and what
    could not be reached), or the WebSocket relay.
    """
    body = read_body(request)
    if isinstance(body, HttpResponse):
        return body
    record_session(caller, cluster, *audit)
    where = (cluster.namespace, head_service(cluster.name), *to)
    query = request.META.get("QUERY_STRING", "")
    try:
        return send_upstream(
            where, request=request, query=query, headers=headers, body=body, cluster=cluster
        )
    except KubeError as exc:
        code, what = unreachable
        return refusal(
            502, code, f"{what} could not be reached through the Kubernetes API: {exc.message}"
        )


def send_upstream(
    where: tuple[str, str, str, str],
    *,
    request: HttpRequest,
    query: str,
    headers: dict[str, str],
    body: bytes | None,
    cluster: ClusterRequest,
) -> Any:
    """Send ``request`` to ``where`` (namespace, service, port, path) through the service
    proxy: the answer to relay, or for a WebSocket handshake the relay that takes it.
    :class:`KubeError` when it cannot be reached."""
    gateway = gateway_of(cluster)
    upgrade = handshake(request)
    if upgrade is not None:
        to = gateway.service_proxy_upgrade(*where, query=query, headers=headers)
        return ray_websocket.accept(upgrade, to, cluster_name=cluster.name)
    return gateway.service_proxy(
        request.method or "GET",
        *where,
        query=query,
        headers=headers,
        body=body,
        timeout=settings.RAY_PROXY_READ_TIMEOUT_SECONDS,
    )
