"""The Ray dashboard in the browser: ``/t/{slug}/clusters/{name}/ray/...``, and the
cluster's JupyterLab: ``/t/{slug}/clusters/{name}/notebook/`` (on the Ray origin only).

The session says who may see the cluster; what its head serves is its users' code, so it
must not run on the product's origin. With ``RAY_PROXY_ORIGIN`` this route only
redirects there with a short-lived grant (``clusters/live/ray_origin.py``); without it,
``clusters/live/ray_proxy.py`` relays here with ``Content-Security-Policy: sandbox`` (an
opaque origin, no scripts: Ray's JavaScript UI shows nothing, its JSON and static pages
read). Writes and WebSockets (a POST from Ray's UI has no CSRF token) are forwarded only
when the browser says they came from the same origin (``same_origin``): else a 403.
"""

from __future__ import annotations

from urllib.parse import quote

from csp.constants import SELF, UNSAFE_INLINE
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.http.response import HttpResponseBase
from django.views.decorators.csrf import csrf_exempt

from clusters.live import notebook_proxy
from clusters.live.ray_grants import issue_grant
from clusters.live.ray_origin import configured_origin, grant_url
from clusters.live.ray_proxy import SAFE_METHODS, Caller, relay, same_origin, visible_cluster
from controlplane.websocket import accepts_websocket, handshake

# The product's policy plus what a static dashboard page needs (Ray styles inline), in
# a sandbox: no scripts, no forms, an origin of its own.
SANDBOXED = {
    "style-src": [SELF, UNSAFE_INLINE],
    "img-src": [SELF, "data:", "blob:"],
    "sandbox": True,
}


@accepts_websocket  # the dashboard's log tail, decided as any other request here
@csrf_exempt
@login_required
def ray_dashboard(request: HttpRequest, slug: str, name: str, path: str = "") -> HttpResponseBase:
    """Redirect to, or relay in a sandbox, the cluster's Ray dashboard (see the module)."""
    cluster, role = visible_cluster(user=request.user, slug=slug, name=name)
    origin = configured_origin()
    if origin is not None:
        if request.method not in ("GET", "HEAD"):
            raise PermissionDenied(
                f"The Ray dashboard is served from {origin.url_for(slug, name)}; send "
                "changes there, or to the API with a token."
            )
        query = request.META.get("QUERY_STRING", "")
        grant = issue_grant(
            cluster=cluster,
            user=request.user,
            role=role,
            next_path=quote(path) + (f"?{query}" if query else ""),
        )
        return HttpResponseRedirect(grant_url(origin, slug=slug, name=name, grant=grant))
    # A WebSocket is read by the page that opened it, whatever its origin (no CORS), so
    # it must come from the dashboard itself, as a write must.
    if (request.method not in SAFE_METHODS or handshake(request)) and not same_origin(request):
        raise PermissionDenied(
            "A change or a WebSocket through the Ray dashboard must come from the dashboard "
            "itself (same origin); use the API with a token for scripts."
        )
    caller = Caller(
        user=request.user, role=role, via="browser", session=request.session.session_key or ""
    )
    base = f"/t/{slug}/clusters/{name}/ray/"
    response = relay(request, cluster=cluster, caller=caller, path=path, base=base)
    # Read by django-csp's middleware, as its decorators set it.
    setattr(response, "_csp_update", SANDBOXED)  # noqa: B010
    return response


@login_required
def notebook_open(request: HttpRequest, slug: str, name: str) -> HttpResponseBase:
    """ "Open JupyterLab": a grant to the cluster's notebook on the Ray origin, for its
    owner and the tenant's admins. A notebook runs its users' code, so it is never
    relayed on the product's origin: without ``RAY_PROXY_ORIGIN`` it does not open."""
    cluster, role = visible_cluster(user=request.user, slug=slug, name=name)
    if not cluster.notebook:
        raise Http404(f"{name} was not requested with a notebook.")
    caller = Caller(user=request.user, role=role, via="browser", session="")
    why = notebook_proxy.refusal_reason(caller=caller, cluster=cluster)
    if why is not None:
        raise PermissionDenied(why)
    origin = configured_origin()
    if origin is None:
        return HttpResponse(
            "JupyterLab is served only on the clusters' own origin, which this deployment "
            "has not set up (RAY_PROXY_ORIGIN, docs/access.md).",
            status=409,
            content_type="text/plain; charset=utf-8",
        )
    grant = issue_grant(cluster=cluster, user=request.user, role=role, next_path="notebook/lab")
    return HttpResponseRedirect(grant_url(origin, slug=slug, name=name, grant=grant))
