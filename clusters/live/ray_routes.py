"""Which of the Ray dashboard's routes the proxy forwards, and for whom.

Ray's dashboard has no authorisation, and some ``GET`` routes change what runs
(``/api/actors/kill``, the profilers), so the method says too little: the proxy forwards
an **allow-list** of the routes Ray's head registers, each a read (who may see the
cluster) or a change (who may manage it). Every other route, one Ray adds later
included, is refused for everyone. The HTTP and WebSocket relays both ask
:func:`ray_route_allowed` or :func:`route_refusal`. ``HEAD`` follows ``GET``; methods Ray
has no handler for are refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# A path segment: an id, a file name. Empty segments (``//``) never match.
_SEG = r"[^/]+"


@dataclass(frozen=True)
class RayRoute:
    """One forwarded route: a full-match pattern over the dashboard path (no leading
    slash), the methods it takes, and whether it changes the cluster (``manage``)."""

    pattern: re.Pattern[str]
    methods: frozenset[str]
    manage: bool


def _route(pattern: str, *methods: str, manage: bool = False) -> RayRoute:
    return RayRoute(re.compile(pattern), frozenset(methods), manage)


READ = "GET"
ROUTES: tuple[RayRoute, ...] = (
    # The dashboard's UI: its page, static bundle and the small helpers it loads.
    _route(r"", READ),
    _route(r"(index\.html|favicon\.ico|timezone)", READ),
    _route(rf"static(/{_SEG})+", READ),
    # Jobs (what Ray's Jobs SDK and `ray job` use).
    _route(r"api/version", READ),
    _route(r"api/jobs/", READ),
    _route(rf"api/jobs/{_SEG}", READ),
    _route(rf"api/jobs/{_SEG}/logs", READ),
    _route(rf"api/jobs/{_SEG}/logs/tail", READ),
    _route(r"api/jobs/", "POST", manage=True),
    _route(rf"api/jobs/{_SEG}/stop", "POST", manage=True),
    _route(rf"api/jobs/{_SEG}", "DELETE", manage=True),
    # A job's working directory or py_modules: the SDK asks whether a package is there
    # (GET) and uploads it (PUT) while submitting, so both belong to submitting.
    _route(rf"api/packages/{_SEG}/{_SEG}", "GET", "PUT", manage=True),
    # Cluster state the UI shows.
    _route(r"api/cluster_status", READ),
    _route(r"api/v0/cluster_metadata", READ),
    _route(r"api/component_activities", READ),
    _route(r"api/gcs_healthz", READ),
    _route(r"api/grafana_health", READ),
    _route(r"api/prometheus_health", READ),
    _route(r"(usage_stats_enabled|cluster_id)", READ),
    _route(r"nodes", READ),
    _route(rf"nodes/{_SEG}", READ),
    _route(r"logical/actors", READ),
    _route(rf"logical/actors/{_SEG}", READ),
    _route(r"events", READ),
    _route(
        r"api/v0/(actors|jobs|nodes|placement_groups|workers|tasks|objects|runtime_envs"
        r"|cluster_events)",
        READ,
    ),
    _route(r"api/v0/(tasks|actors|objects)/summarize", READ),
    _route(r"api/v0/tasks/timeline", READ),
    _route(r"api/v0/logs", READ),
    _route(r"api/v0/logs/(file|stream)", READ),
    _route(rf"api/data/datasets/{_SEG}", READ),
    _route(r"api/train/v2/runs", READ),
    _route(r"api/serve/applications/", READ),
    # Changes made with a GET (or through Serve's REST API).
    _route(r"api/actors/kill", READ, manage=True),
    _route(r"(task|worker)/(traceback|cpu_profile)", READ, manage=True),
    _route(r"worker/gpu_profile", READ, manage=True),
    _route(r"memory_profile", READ, manage=True),
    _route(r"api/serve/applications/", "PUT", "DELETE", manage=True),
)


NOT_FORWARDED = "the proxy does not forward this route of the Ray dashboard"
CHANGES_CLUSTER = "it changes what runs on the cluster"


def _find(method: str, path: str) -> RayRoute | None:
    wanted = READ if method == "HEAD" else method
    for route in ROUTES:
        if wanted in route.methods and route.pattern.fullmatch(path):
            return route
    return None


def route_refusal(*, method: str, path: str, can_manage: bool) -> str | None:
    """Why ``method path`` is not forwarded for this caller (``None``: it is); ``path``,
    decoded, without query, is matched exactly, so a spelling Ray would route
    elsewhere is not on the list."""
    route = _find(method.upper(), path[1:] if path.startswith("/") else path)
    if route is None:
        return NOT_FORWARDED
    if route.manage and not can_manage:
        return CHANGES_CLUSTER
    return None


def ray_route_allowed(*, method: str, path: str, can_manage: bool) -> bool:
    """Whether the proxy forwards ``method path`` for this caller (see :func:`route_refusal`)."""
    return route_refusal(method=method, path=path, can_manage=can_manage) is None


__all__ = [
    "CHANGES_CLUSTER",
    "NOT_FORWARDED",
    "ROUTES",
    "RayRoute",
    "ray_route_allowed",
    "route_refusal",
]
