"""``/api/v1/tenants/{slug}/clusters/{name}/tunnel/?port=N``: a tunnel to the head pod.

A WebSocket only (``gangway port-forward`` and ``gangway ssh`` open one per TCP
connection): authenticated with the API's token, like the Ray proxy's API route, and
decided by :func:`clusters.live.tunnels.refusal`. Refusals are the API's error bodies
with their status (401, 404, 403, 409, 400, 426 for a plain GET).
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.http.response import HttpResponseBase
from django.views.decorators.csrf import csrf_exempt

from clusters.api.ray_views import reach_cluster
from clusters.live import tunnels
from controlplane.api.errors import error_body
from controlplane.websocket import accepts_websocket, handshake


@accepts_websocket
@csrf_exempt
def tunnel(request: HttpRequest, tenant_slug: str, name: str) -> HttpResponseBase:
    """Open a tunnel to ``?port=`` of the cluster's head for the token's user."""
    reached = reach_cluster(
        request,
        tenant_slug=tenant_slug,
        name=name,
        send_token="Send an API token: 'Authorization: Token <token>' (gangway login does it).",
    )
    if isinstance(reached, HttpResponse):
        return reached
    user, cluster, role = reached.user, reached.cluster, reached.role
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
