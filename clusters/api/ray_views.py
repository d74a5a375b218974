"""``/api/v1/tenants/{slug}/clusters/{name}/ray/...``: the Ray dashboard for API tokens,
for Ray's Jobs SDK first of all (``JobSubmissionClient(url, headers={"Authorization":
"Token <token>"})``). A plain Django view streaming the dashboard's answer
(``clusters/live/ray_proxy.py``). Only the API's token authenticates (no cookies, so no
CSRF; else the API's 401), so a browser with just the session cookie never gets a
cluster's page on the product's origin; every answer carries
``Content-Security-Policy: sandbox`` in case one is opened in a browser. A WebSocket
handshake (``tail_job_logs``) gets the same answers under ASGI.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.http.response import HttpResponseBase
from django.views.decorators.csrf import csrf_exempt
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.request import Request

from clusters.live.ray_proxy import Caller, relay, visible_cluster
from clusters.models import ClusterRequest
from controlplane.api.authentication import TokenAuthentication
from controlplane.api.errors import error_body
from controlplane.websocket import accepts_websocket


def unauthenticated(message: str, code: str = "not_authenticated") -> HttpResponse:
    response = JsonResponse(error_body(code, message), status=401)
    response["WWW-Authenticate"] = "Token"
    return response


@dataclass(frozen=True)
class Reached:
    """The API token's user (and token) and the cluster the path names, as they see it."""

    user: Any
    token: Any
    cluster: ClusterRequest
    role: str | None


def reach_cluster(
    request: HttpRequest, *, tenant_slug: str, name: str, send_token: str
) -> Reached | HttpResponse:
    """Who the API token says the caller is, and the cluster they may see; else the API's
    401 (``send_token``: how to send one) or its one 404 body, which never says which
    part of the path named nothing."""
    try:
        found = TokenAuthentication().authenticate(Request(request))
    except AuthenticationFailed as exc:
        return unauthenticated(str(exc.detail), "authentication_failed")
    if found is None:
        return unauthenticated(send_token)
    user, token = found
    try:
        cluster, role = visible_cluster(user=user, slug=tenant_slug, name=name)
    except Http404:
        return JsonResponse(error_body("not_found", "Not found."), status=404)
    return Reached(user=user, token=token, cluster=cluster, role=role)


@accepts_websocket  # Ray's log tail, decided as any other request here
@csrf_exempt
def ray_proxy(
    request: HttpRequest, tenant_slug: str, name: str, path: str = ""
) -> HttpResponseBase:
    """Forward to the cluster's Ray dashboard for the token's user (see the module)."""
    reached = reach_cluster(
        request,
        tenant_slug=tenant_slug,
        name=name,
        send_token="Send an API token: 'Authorization: Token <token>' or 'Authorization: "
        "Bearer <token>' (POST /api/v1/auth/token/).",
    )
    if isinstance(reached, HttpResponse):
        return reached
    caller = Caller(
        user=reached.user, role=reached.role, via="api", session=str(reached.token.token_key)
    )
    base = f"/api/v1/tenants/{tenant_slug}/clusters/{name}/ray/"
    response = relay(request, cluster=reached.cluster, caller=caller, path=path, base=base)
    # Read by django-csp's middleware, as its decorators set it.
    setattr(response, "_csp_update", {"sandbox": True})  # noqa: B010
    return response
