"""``/api/v1/tenants/{slug}/clusters/{name}/tunnel/?port=N``: a tunnel to the head pod.

A WebSocket only (``gangway port-forward`` and ``gangway ssh`` open one per TCP
connection): authenticated with the API's token, like the Ray proxy's API route, and
decided by :func:`clusters.live.tunnels.refusal`. Refusals are the API's error bodies
with their status (401, 404, 403, 409, 400, 426 for a plain GET).
"""

from __future__ import annotations

from django.http import Http404, HttpRequest, JsonResponse
from django.http.response import HttpResponseBase
from django.views.decorators.csrf import csrf_exempt
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.request import Request

from clusters.api.ray_views import unauthenticated
from clusters.live import tunnels
from clusters.live.ray_proxy import visible_cluster
from controlplane.api.authentication import TokenAuthentication
from controlplane.api.errors import error_body
from controlplane.websocket import accepts_websocket, handshake


@accepts_websocket
@csrf_exempt
def tunnel(request: HttpRequest, tenant_slug: str, name: str) -> HttpResponseBase:
    """Open a tunnel to ``?port=`` of the cluster's head for the token's user."""
    try:
        found = TokenAuthentication().authenticate(Request(request))
    except AuthenticationFailed as exc:
        return unauthenticated(str(exc.detail), "authentication_failed")
    if found is None:
        return unauthenticated(
            "Send an API token: 'Authorization: Token <token>' (gangway login does it)."
        )
    user, _ = found
    try:
        cluster, role = visible_cluster(user=user, slug=tenant_slug, name=name)
    except Http404:
        return JsonResponse(error_body("not_found", "Not found."), status=404)
    given = request.GET.get("port", "")
    port = int(given) if given.isdigit() else 0  # 0: refused below, as any non-port
    purpose = request.GET.get("purpose") or "port-forward"
    if purpose not in tunnels.PURPOSES:
        purpose = "port-forward"
    refused = tunnels.refusal(user=user, cluster=cluster, role=role, port=port)
    if refused is not None:
        return refused.response()
    if handshake(request) is None:
        message = "A tunnel is a WebSocket: use gangway port-forward or gangway ssh."
        return JsonResponse(error_body("upgrade_required", message), status=426)
    return tunnels.accept(cluster=cluster, user=user, port=port, purpose=purpose)
