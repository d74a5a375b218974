"""JupyterLab on a Ray head: the container convention, and reading its kernels' activity.

A cluster requested with ``notebook`` gets, on its head container (docs/notebooks.md):

- a container port named ``notebook`` (8888), which KubeRay copies onto the head service;
- ``GANGWAY_NOTEBOOK_BASE_URL``, the path the product's proxy serves it under, and
  ``GANGWAY_NOTEBOOK_PORT``;
- ``rayStartParams.block: "false"`` and ``args`` running ``jupyter lab`` with those: KubeRay
  runs ``ray start --head`` and then the container's args, which keep the container up.

Jupyter's own token is off: only the product's proxy (which authenticates) reaches it.
:func:`read_kernels` reads ``/api/kernels`` through the API server's service proxy, as
the idle detector reads the Ray dashboard.
"""

from __future__ import annotations

import datetime
import shlex
from typing import Any

import orjson

from clusters.kube.gateway import Gateway
from clusters.kube.manifests import NOTEBOOK_PORT
from clusters.kube.raydash import Activity, DashboardUnreachable, head_get

NOTEBOOK_PORT_NAME = "notebook"
BASE_URL_ENV = "GANGWAY_NOTEBOOK_BASE_URL"
PORT_ENV = "GANGWAY_NOTEBOOK_PORT"
# Under a cluster's path on the Ray origin (``clusters/live/ray_origin.py``), so that
# the one cookie of that path admits both the dashboard and the notebook.
NOTEBOOK_SEGMENT = "notebook"
NOTEBOOK_ROOT = "/home/ray"
_MAX_ANSWER = 1024 * 1024


def base_url(slug: str, name: str) -> str:
    """The path JupyterLab is served under, with both slashes (its ``base_url``)."""
    return f"/c/{slug}/{name}/{NOTEBOOK_SEGMENT}/"


def jupyter_args(url: str) -> str:
    """The shell command KubeRay runs after ``ray start`` on a notebook head."""
    return shlex.join(
        [
            "jupyter",
            "lab",
            "--no-browser",
            "--ServerApp.ip=0.0.0.0",
            f"--ServerApp.port={NOTEBOOK_PORT}",
            f"--ServerApp.base_url={url}",
            f"--ServerApp.root_dir={NOTEBOOK_ROOT}",
            # Reached only through the API server's service proxy, whose Host is not
            # the pod's own.
            "--ServerApp.allow_remote_access=True",
            # No token: the product's proxy authenticates every request (owner and tenant
            # admins only), and nothing else reaches the port (docs/notebooks.md).
            "--IdentityProvider.token=",
        ]
    )


def head_container_patch(container: dict[str, Any], *, slug: str, name: str) -> None:
    """Give a head container the notebook convention (in place)."""
    url = base_url(slug, name)
    container["ports"].append(
        {"name": NOTEBOOK_PORT_NAME, "containerPort": NOTEBOOK_PORT, "protocol": "TCP"}
    )
    container["env"].extend(
        [{"name": BASE_URL_ENV, "value": url}, {"name": PORT_ENV, "value": str(NOTEBOOK_PORT)}]
    )
    container["args"] = [jupyter_args(url)]


def _moment(value: Any) -> datetime.datetime | None:
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=datetime.UTC)


def kernels_activity(kernels: Any) -> Activity:
    """Jupyter's kernel list as activity: a busy kernel is use now; the latest
    ``last_activity`` of any kernel is when it last was."""
    busy = 0
    moments = []
    for kernel in kernels if isinstance(kernels, list) else []:
        if not isinstance(kernel, dict):
            continue
        busy += kernel.get("execution_state") == "busy"
        moment = _moment(kernel.get("last_activity"))
        if moment:
            moments.append(moment)
    last = max(moments) if moments else None
    if busy:
        return Activity(True, last, "a notebook kernel is busy")
    if last is not None:
        return Activity(False, last, f"a notebook kernel was last busy at {last:%H:%M} UTC")
    return Activity(False, None, "no notebook kernel has run")


def read_kernels(gw: Gateway, namespace: str, ray_cluster: str, slug: str) -> Activity:
    """The notebook's kernels as activity; :class:`DashboardUnreachable` when JupyterLab
    does not answer (not evidence of idleness either)."""
    path = base_url(slug, ray_cluster).lstrip("/") + "api/kernels"
    answer, body = head_get(
        gw, namespace, ray_cluster, NOTEBOOK_PORT_NAME, path, limit=_MAX_ANSWER, what="notebook: "
    )
    if answer.status != 200:
        text = body[:200].decode("utf-8", errors="replace").strip()
        raise DashboardUnreachable(f"notebook GET api/kernels answered {answer.status}: {text}")
    try:
        return kernels_activity(orjson.loads(body))
    except orjson.JSONDecodeError as exc:
        raise DashboardUnreachable(f"notebook GET api/kernels did not answer JSON ({exc})") from exc
