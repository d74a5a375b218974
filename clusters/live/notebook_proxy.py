"""JupyterLab on a cluster's head, relayed on the Ray origin at ``/c/{tenant}/{cluster}/notebook/``.

The Ray origin (``ray_origin.py``) has decided who the cookie's user is and that they see
the cluster; a notebook runs any code on the cluster, so :func:`relay` lets through only
those who may manage it (its owner and the tenant's admins), for a cluster asked with
``notebook``, once it is ready. Everyone else gets a 403 page that says why.

JupyterLab knows its prefix (its ``base_url`` is this path, ``clusters/kube/notebook.py``),
so paths and redirects go through unchanged. Jupyter's token is off behind this proxy;
its XSRF defence stays: the ``_xsrf`` cookie (and only it) is carried both ways, and the
``X-XSRFToken`` header the UI sends with it. Kernels talk over a WebSocket, relayed as
the dashboard's (``ray_websocket.py``).
"""

from __future__ import annotations

from http.cookies import CookieError, SimpleCookie
from urllib.parse import unquote

from django.http import HttpRequest, HttpResponse
from django.http.response import HttpResponseBase

from clusters.domain.states import State
from clusters.kube.notebook import NOTEBOOK_PORT_NAME, NOTEBOOK_SEGMENT, base_url
from clusters.live.ray_proxy import (
    METHODS,
    Caller,
    forward,
    forwarded_headers,
    refusal,
    relayed,
    role_label,
    route_refused,
    upstream_path,
)
from clusters.models import ClusterRequest
from clusters.requests import rules

AUDIT_ACTION = "cluster.notebook_opened"
XSRF_COOKIE = "_xsrf"
# JupyterLab's own header for its XSRF token, besides the dashboard proxy's list.
_MORE_REQUEST_HEADERS = ("x-xsrftoken",)


def is_notebook_path(path: str) -> bool:
    """Whether a path under a cluster's prefix on the Ray origin is the notebook's."""
    return path == NOTEBOOK_SEGMENT or path.startswith(NOTEBOOK_SEGMENT + "/")


def refusal_reason(*, caller: Caller, cluster: ClusterRequest) -> str | None:
    """Why ``caller`` may not open the cluster's JupyterLab; ``None`` when they may."""
    if not cluster.notebook:
        return f"{cluster.name} was not requested with a notebook."
    if not rules.can_manage(actor=caller.user, cluster=cluster, role=caller.role):
        return (
            f"JupyterLab on {cluster.name} runs code as its owner: only "
            f"{cluster.owner.get_username()} and the tenant's admins may open it, and you "
            f"are {role_label(caller, cluster)}."
        )
    return None


def _xsrf_cookie(request: HttpRequest) -> dict[str, str]:
    value = request.COOKIES.get(XSRF_COOKIE)
    return {"Cookie": f"{XSRF_COOKIE}={value}"} if value else {}


def _pass_xsrf_cookie(response: HttpResponseBase, set_cookies: list[str], path: str) -> None:
    """Jupyter's ``_xsrf`` cookie (read by its UI's script, so not HttpOnly) on the
    notebook's path; every other cookie Jupyter sets stays on the cluster's side."""
    for header in set_cookies:
        jar: SimpleCookie = SimpleCookie()
        try:
            jar.load(header)
        except CookieError:
            continue
        if XSRF_COOKIE in jar:
            response.set_cookie(XSRF_COOKIE, jar[XSRF_COOKIE].value, path=path, samesite="Lax")


def relay(
    request: HttpRequest, *, cluster: ClusterRequest, caller: Caller, path: str
) -> HttpResponseBase:
    """Forward ``request`` (``path`` under the cluster's prefix) to its JupyterLab."""
    method = request.method or "GET"
    if method not in METHODS:
        return refusal(405, "method_not_allowed", f"The proxy does not forward {method}.")
    why = refusal_reason(caller=caller, cluster=cluster)
    if why is not None:
        return route_refused(request, why)
    prefix = base_url(cluster.tenant.slug, cluster.name)
    target = upstream_path(prefix.lstrip("/") + path[len(NOTEBOOK_SEGMENT) + 1 :])
    if target is None:
        return refusal(400, "bad_path", "The path may not contain '.' or '..' segments.")
    if cluster.state != State.READY:
        page = HttpResponse(
            f"{cluster.name} is {cluster.get_state_display().lower()}; its JupyterLab opens "
            "once it is ready.",
            status=409,
            content_type="text/plain; charset=utf-8",
        )
        return page
    headers = {**forwarded_headers(request, prefix, _MORE_REQUEST_HEADERS), **_xsrf_cookie(request)}
    answer = forward(
        request,
        cluster=cluster,
        caller=caller,
        to=(NOTEBOOK_PORT_NAME, target),
        headers=headers,
        audit=(unquote(target), AUDIT_ACTION),
        unreachable=("notebook_unreachable", f"JupyterLab on {cluster.name}"),
    )
    if isinstance(answer, HttpResponseBase):
        return answer  # a refusal, or the kernels' WebSocket relay
    response = relayed(request, answer, prefix, rebase_location=False)
    _pass_xsrf_cookie(response, answer.header_list("set-cookie"), prefix)
    return response
