"""The Ray dashboard in the browser: ``/t/{slug}/clusters/{name}/ray/...``.

The signed-in user's session decides who they are; ``clusters/access/proxy.py`` does the
forwarding (and strips the session cookie on the way). The dashboard's own scripts make
requests (a job stopped from Ray's UI is a POST) that carry no Django CSRF token, so
the CSRF defence here is the browser's own word on where a write came from: a write is
forwarded only when ``Sec-Fetch-Site`` says ``same-origin``, or, from a browser that does
not send it, when ``Origin`` is this site. A cross-site form or script gets a 403, and so
does a cross-site WebSocket (the log tail), which its page could read.

Ray's dashboard styles its pages inline, so its answers get a content security policy
that allows inline styles (never inline scripts) on top of the product's.
"""

from __future__ import annotations

from csp.constants import SELF, UNSAFE_INLINE
from csp.decorators import csp_update
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest
from django.http.response import HttpResponseBase
from django.views.decorators.csrf import csrf_exempt

from clusters.access.proxy import SAFE_METHODS, Caller, relay, visible_cluster
from controlplane.websocket import accepts_websocket, handshake


def _same_origin(request: HttpRequest) -> bool:
    site = request.headers.get("Sec-Fetch-Site")
    if site is not None:
        return site == "same-origin"
    origin = request.headers.get("Origin")
    return origin is not None and origin == f"{request.scheme}://{request.get_host()}"


@accepts_websocket  # the dashboard's log tail, decided as any other request here
@csrf_exempt
# django-csp types its decorator for views of one argument only.
@csp_update({"style-src": [SELF, UNSAFE_INLINE], "img-src": [SELF, "data:", "blob:"]})  # type: ignore[arg-type]
@login_required
def ray_dashboard(request: HttpRequest, slug: str, name: str, path: str = "") -> HttpResponseBase:
    """Forward to the cluster's Ray dashboard for the signed-in user (see the module)."""
    cluster, role = visible_cluster(user=request.user, slug=slug, name=name)
    # A WebSocket is read by the page that opened it, whatever its origin (no CORS), so
    # it must come from the dashboard itself, as a write must.
    if (request.method not in SAFE_METHODS or handshake(request)) and not _same_origin(request):
        raise PermissionDenied(
            "A change or a WebSocket through the Ray dashboard must come from the dashboard "
            "itself (same origin); use the API with a token for scripts."
        )
    caller = Caller(
        user=request.user, role=role, via="browser", session=request.session.session_key or ""
    )
    base = f"/t/{slug}/clusters/{name}/ray/"
    return relay(request, cluster=cluster, caller=caller, path=path, base=base)
