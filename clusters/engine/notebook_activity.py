"""Busy notebook kernels count as use: the idle detector's second source, after Ray.

For a cluster asked with ``notebook``, JupyterLab's kernels are read
(:func:`clusters.kube.notebook.read_kernels`) and folded into Ray's reading: either
being in use now is use, the later of their last moments is the last use, and the
reason names the source that kept the cluster alive. A notebook that cannot be read
leaves Ray's reading as it is, with a word on the page: a crashed JupyterLab runs no
kernel, and a cluster without one must still go idle.
"""

from __future__ import annotations

from clusters.kube.gateway import Gateway
from clusters.kube.notebook import read_kernels
from clusters.kube.raydash import Activity, DashboardUnreachable
from clusters.models import ClusterRequest


def combine(ray: Activity, notebook: Activity) -> Activity:
    """One reading of two sources: active if either is, the later last moment, and the
    reason of the source that decided."""
    moments = [m for m in (ray.last_active_at, notebook.last_active_at) if m]
    last = max(moments) if moments else None
    if ray.active or notebook.active:
        return Activity(True, last, ray.reason if ray.active else notebook.reason)
    newer = notebook.last_active_at is not None and (
        ray.last_active_at is None or notebook.last_active_at > ray.last_active_at
    )
    return Activity(False, last, notebook.reason if newer else ray.reason)


def with_notebook(gw: Gateway, cluster: ClusterRequest, ray: Activity) -> Activity:
    """Ray's reading of ``cluster`` with its notebook's kernels counted, if it has one."""
    if not cluster.notebook:
        return ray
    try:
        kernels = read_kernels(gw, cluster.namespace, cluster.name, cluster.tenant.slug)
    except DashboardUnreachable as exc:
        return Activity(ray.active, ray.last_active_at, f"{ray.reason}; {exc.message}")
    return combine(ray, kernels)
