"""Talking to a cluster's Ray dashboard through the Kubernetes API's service proxy.

The API server's service proxy (``.../services/{cluster}-head-svc:dashboard/proxy/``)
reaches the head's dashboard, so the browser's reverse proxy
(``clusters/live/ray_proxy.py``) and the idle detector (:func:`read_activity`) need no
route or Ingress of their own. "Active" is Ray's own view: ``/api/component_activities``
(a driver other than the dashboard's runs, or last ran at ``last_activity_at``) and
``/api/jobs/`` (a pending or running job is activity now, any job's start or end then).
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Any

import orjson

from clusters.kube import notbefore
from clusters.kube.errors import retry_after_seconds
from clusters.kube.gateway import Gateway, ProxiedResponse, TransientKubeError

DASHBOARD_PORT_NAME = "dashboard"
# An activity answer is a few hundred bytes; a job list of a busy cluster a few hundred
# kilobytes. Anything past this is not read (the newest jobs come first in neither case,
# so a cut list only hides old jobs, which do not decide idleness).
_MAX_ANSWER = 4 * 1024 * 1024
_LIVE_JOB_STATUSES = frozenset({"PENDING", "RUNNING"})


def head_service(ray_cluster: str) -> str:
    """The head service KubeRay makes for a RayCluster (``<name>-head-svc``)."""
    return f"{ray_cluster}-head-svc"


@dataclass(frozen=True)
class Activity:
    """What Ray says about a cluster's use: active now, and when it last was."""

    active: bool
    last_active_at: datetime.datetime | None
    reason: str


class DashboardUnreachable(Exception):
    """The dashboard did not answer usefully; ``message`` says what happened, for people."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _epoch(value: Any, *, millis: bool = False) -> datetime.datetime | None:
    if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
        return None
    seconds = value / 1000 if millis else value
    try:
        return datetime.datetime.fromtimestamp(seconds, tz=datetime.UTC)
    except (OverflowError, OSError, ValueError):
        return None


def head_get(
    gw: Gateway,
    namespace: str,
    ray_cluster: str,
    port_name: str,
    path: str,
    *,
    limit: int,
    what: str = "",
) -> tuple[ProxiedResponse, bytes]:
    """GET ``path`` (JSON) on a port of the cluster's head through the service proxy: the
    answer and at most ``limit`` bytes of its body. :class:`DashboardUnreachable`, its
    message after ``what``, when the proxy cannot reach the head."""
    try:
        answer = gw.service_proxy(
            "GET",
            namespace,
            head_service(ray_cluster),
            port_name,
            path,
            headers={"Accept": "application/json"},
        )
        return answer, answer.read(limit)
    except TransientKubeError as exc:
        raise DashboardUnreachable(f"{what}{exc.message}") from exc


def _get_json(gw: Gateway, namespace: str, ray_cluster: str, path: str) -> Any:
    # A 429 (from the API server or the dashboard) holds this read back for its
    # Retry-After in every process, as the gateway does for its own calls.
    held = f"{namespace}/{ray_cluster}/{path}"
    left = notbefore.wait("dashboard", held)
    if left > 0:
        raise DashboardUnreachable(f"GET {path}: waiting {left:.1f} s more, as asked (429)")
    answer, body = head_get(
        gw, namespace, ray_cluster, DASHBOARD_PORT_NAME, path, limit=_MAX_ANSWER
    )
    if answer.status == 429:
        asked = retry_after_seconds(answer.headers.get("retry-after"))
        # 1 s when it gives none we can read; never more than 5 minutes of silence.
        notbefore.hold("dashboard", held, min(1.0 if asked is None else asked, 300.0))
    if answer.status != 200:
        text = body[:300].decode("utf-8", errors="replace").strip()
        raise DashboardUnreachable(f"GET {path} answered {answer.status}: {text}")
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise DashboardUnreachable(f"GET {path} did not answer JSON ({exc})") from exc


def read_activity(gw: Gateway, namespace: str, ray_cluster: str) -> Activity:
    """Ray's view of whether the cluster is in use (see the module docstring).

    Raises :class:`DashboardUnreachable` when either endpoint cannot be read: the caller
    must then not take the cluster for idle (a dashboard that does not answer is not
    evidence that nobody works on the cluster).
    """
    components = _get_json(gw, namespace, ray_cluster, "api/component_activities")
    jobs = _get_json(gw, namespace, ray_cluster, "api/jobs/")
    driver = components.get("driver") if isinstance(components, dict) else None
    driver = driver if isinstance(driver, dict) else {}
    moments: list[datetime.datetime] = []
    seen = _epoch(driver.get("last_activity_at"))
    if seen:
        moments.append(seen)
    live_jobs = []
    for job in jobs if isinstance(jobs, list) else []:
        if not isinstance(job, dict):
            continue
        if job.get("status") in _LIVE_JOB_STATUSES:
            live_jobs.append(str(job.get("submission_id") or job.get("job_id") or "?"))
        for key in ("start_time", "end_time"):
            moment = _epoch(job.get(key), millis=True)
            if moment:
                moments.append(moment)
    last = max(moments) if moments else None
    if driver.get("is_active") == "ACTIVE":
        return Activity(True, last, str(driver.get("reason") or "a Ray driver is running"))
    if live_jobs:
        return Activity(True, last, f"job {live_jobs[0]} is running")
    return Activity(False, last, "no Ray driver or job is running")
