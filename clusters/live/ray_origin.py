"""The Ray dashboard on an origin of its own (``RAY_PROXY_ORIGIN``, docs/access.md).

A head serves code its users control; on the product's origin a script in it would run
with the rights of whoever looks. So the product's Ray route only redirects here with a
grant (``ray_grants.py``), and this origin serves ``/grant?g=`` (redeemed for a cookie
scoped to the cluster's path), ``/c/{tenant}/{cluster}/{path}`` (the dashboard, relayed
for a user who still sees the cluster; ``.../notebook/``: its JupyterLab,
``notebook_proxy.py``) and 404 for anything else: never the product's
pages, and :class:`RayOriginMiddleware` answers before the session middleware reads a
cookie. ``scheme://{cluster}.suffix`` gives each cluster an origin of its own.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any
from urllib.parse import quote, urlencode

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import DisallowedHost
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseRedirect,
    JsonResponse,
)
from django.http.response import HttpResponseBase
from django.utils.html import escape

from clusters.live import notebook_proxy
from clusters.live.ray_grants import (
    SESSION_COOKIE,
    DashboardPass,
    read_session,
    redeem_grant,
    session_cookie_value,
)
from clusters.live.ray_proxy import Caller, relay, same_origin, visible_cluster
from controlplane.api.errors import error_body
from controlplane.rayorigin import ORIGIN as ORIGIN_FORM

_CLUSTER_PATH = re.compile(r"/c/(?P<slug>[-a-z0-9]+)/(?P<name>[-a-z0-9]+)(?P<slash>/?)(?P<path>.*)")
# The cluster's own origin runs its own scripts (that is why it is separate) and may
# embed what Ray's UI embeds (Grafana); it is never framed, and never gets plugins.
ORIGIN_POLICY = "frame-ancestors 'none'; object-src 'none'; base-uri 'self'"


@dataclass(frozen=True)
class RayOrigin:
    """The configured origin: scheme, host (without the ``{cluster}.`` label of a
    per-cluster origin, ``per_cluster`` then) and ``:port`` (or "")."""

    scheme: str
    host: str
    port: str
    per_cluster: bool

    @property
    def secure(self) -> bool:
        return self.scheme == "https"

    def host_for(self, slug: str, name: str) -> str:
        """The ``Host`` (with port) that serves the cluster's dashboard."""
        host = f"{cluster_label(slug, name)}.{self.host}" if self.per_cluster else self.host
        return host + self.port

    def url_for(self, slug: str, name: str) -> str:
        """The origin (scheme and host) that serves the cluster's dashboard."""
        return f"{self.scheme}://{self.host_for(slug, name)}"

    def serves(self, host: str) -> bool:
        """Whether a request for ``host`` (a ``Host`` header) is one for this origin."""
        host = host.lower()
        if not self.per_cluster:
            return host == self.host + self.port
        label, dot, rest = host.partition(".")
        return bool(dot and label) and rest == self.host + self.port


def cluster_label(slug: str, name: str) -> str:
    """The DNS label of a cluster's own origin: its name and a digest of tenant and
    name (at most 63 characters; names repeat across tenants, the digest does not)."""
    digest = hashlib.sha256(f"{slug}/{name}".encode()).hexdigest()[:10]
    return f"{name[:52]}-{digest}"


@lru_cache(maxsize=4)
def _parse(value: str) -> RayOrigin | None:
    found = ORIGIN_FORM.fullmatch(value.lower())
    if found is None:
        return None
    return RayOrigin(
        scheme=found["scheme"],
        host=found["host"],
        port=found["port"] or "",
        per_cluster=bool(found["wild"]),
    )


def configured_origin() -> RayOrigin | None:
    """The Ray dashboards' origin, or ``None`` when ``RAY_PROXY_ORIGIN`` is unset."""
    value = settings.RAY_PROXY_ORIGIN
    return _parse(value) if value else None


def grant_url(origin: RayOrigin, *, slug: str, name: str, grant: str) -> str:
    """Where the product sends a browser with a grant."""
    return f"{origin.url_for(slug, name)}/grant?{urlencode({'g': grant})}"


def product_url(slug: str, name: str, path: str = "") -> str:
    """The product's Ray route of a cluster, which issues a new grant."""
    return f"{settings.PUBLIC_BASE_URL}/t/{slug}/clusters/{name}/ray/{path}"


def _not_here() -> HttpResponse:
    return HttpResponse(
        "Not found. This host serves clusters' Ray dashboards only.\n",
        status=404,
        content_type="text/plain; charset=utf-8",
    )


def _page(status: int, title: str, message: str) -> HttpResponse:
    return HttpResponse(
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{escape(title)}'
        f"</title></head><body><h1>{escape(title)}</h1><p>{escape(message)}</p></body></html>",
        status=status,
        content_type="text/html; charset=utf-8",
    )


def _live_pass(grant: DashboardPass) -> tuple[Any, Any, str | None] | None:
    """The user, cluster and role a grant or session stands for, if the user still sees
    that very cluster (same id) with the same role; ``None`` otherwise."""
    user = get_user_model().objects.filter(pk=grant.user_id, is_active=True).first()
    if user is None:
        return None
    try:
        cluster, role = visible_cluster(user=user, slug=grant.slug, name=grant.name)
    except Http404:
        return None
    if cluster.pk != grant.cluster_id or role != grant.role:
        return None
    return user, cluster, role


def redeem(request: HttpRequest, origin: RayOrigin) -> HttpResponseBase:
    """``GET /grant?g=``: a grant becomes this origin's cookie for the cluster's path."""
    # GET only: a HEAD (a link preview, say) must not use up the one redemption.
    if request.method != "GET":
        return _not_here()
    grant = redeem_grant(request.GET.get("g", ""))
    if grant is None:
        return _page(
            403,
            "This link has expired",
            "A link to a Ray dashboard works once, for a few minutes. Open the dashboard "
            "again from its cluster's page in gangway.",
        )
    if request.get_host().lower() != origin.host_for(grant.slug, grant.name):
        return _not_here()
    if _live_pass(grant) is None:
        return _page(
            403,
            "No access",
            f"You may no longer open the Ray dashboard of {grant.name}.",
        )
    base = f"/c/{grant.slug}/{grant.name}/"
    response = HttpResponseRedirect(base + grant.next)
    response.set_cookie(
        SESSION_COOKIE,
        session_cookie_value(grant),
        max_age=settings.RAY_PROXY_SESSION_MINUTES * 60,
        path=base,
        secure=origin.secure,
        httponly=True,
        samesite="Lax",
    )
    return response


def _unauthorised(request: HttpRequest, slug: str, name: str, path: str) -> HttpResponseBase:
    """No usable session: a page load goes back to the product for a new grant."""
    if request.method in ("GET", "HEAD"):
        query = request.META.get("QUERY_STRING", "")
        return HttpResponseRedirect(
            product_url(slug, name, quote(path)) + (f"?{query}" if query else "")
        )
    return JsonResponse(
        error_body(
            "not_authenticated",
            f"Open the Ray dashboard of {name} from gangway again: your access to it "
            "expired or changed.",
        ),
        status=401,
    )


def dashboard(
    request: HttpRequest, origin: RayOrigin, slug: str, name: str, path: str
) -> HttpResponseBase:
    """``/c/{slug}/{name}/{path}``: the cluster's dashboard for the cookie's user."""
    if request.get_host().lower() != origin.host_for(slug, name):
        return _not_here()
    session = read_session(request.COOKIES.get(SESSION_COOKIE))
    if session is None or (session.slug, session.name) != (slug, name):
        return _unauthorised(request, slug, name, path)
    live = _live_pass(session)
    if live is None:
        return _unauthorised(request, slug, name, path)
    user, cluster, role = live
    if request.method not in ("GET", "HEAD") and not same_origin(
        request, origin.url_for(slug, name)
    ):
        return JsonResponse(
            error_body(
                "permission_denied",
                "A change through the Ray dashboard must come from the dashboard itself "
                "(same origin); use the API with a token for scripts.",
            ),
            status=403,
        )
    caller = Caller(user=user, role=role, via="browser", session=f"rayorigin:{session.sid}")
    if notebook_proxy.is_notebook_path(path):
        return notebook_proxy.relay(request, cluster=cluster, caller=caller, path=path)
    return relay(request, cluster=cluster, caller=caller, path=path, base=f"/c/{slug}/{name}/")


def serve(request: HttpRequest, origin: RayOrigin) -> HttpResponseBase:
    """Every request for the Ray origin: the grant, a cluster's dashboard, else 404."""
    if request.path == "/grant":
        response = redeem(request, origin)
    elif (found := _CLUSTER_PATH.fullmatch(request.path)) is None:
        response = _not_here()
    elif not found["slash"]:
        response = HttpResponseRedirect(request.path + "/")
    else:
        response = dashboard(request, origin, found["slug"], found["name"], found["path"])
    response["Content-Security-Policy"] = ORIGIN_POLICY
    response["X-Frame-Options"] = "DENY"
    response["Cross-Origin-Opener-Policy"] = "same-origin"
    response["Referrer-Policy"] = "no-referrer"
    return response


class RayOriginMiddleware:
    """Serves the Ray origin's requests (:func:`serve`) and passes on every other one.

    Placed right after the security middleware, so the origin's answers get HTTPS
    redirects and HSTS but none of the product's sessions, CSRF cookies or pages."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        origin = configured_origin()
        if origin is not None:
            try:
                host = request.get_host()
            except DisallowedHost:
                host = ""  # the product's handling answers it (a 400)
            if host and origin.serves(host):
                return serve(request, origin)
        return self.get_response(request)


__all__ = [
    "ORIGIN_POLICY",
    "RayOrigin",
    "RayOriginMiddleware",
    "cluster_label",
    "configured_origin",
    "grant_url",
    "product_url",
]
