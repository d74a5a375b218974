"""A real JupyterLab behind every Ray head pod that asks for one (a ``localproc`` launcher).

A head container asks with a port named ``notebook`` and the env
``GANGWAY_NOTEBOOK_BASE_URL`` (gangway's convention, docs/notebooks.md). :func:`launch`
starts ``jupyter lab`` from this Python's environment with no token: the API server's service
proxy and whoever is in front of it decide who gets there. When a real Ray head of the pod is
already known to ``localprocs`` its GCS address is the kernels' ``RAY_ADDRESS`` (the Ray
launcher runs first, so a head started in the same pass is known). kubesim/README.md
(*Notebooks*) says the rest.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from kubesim.localproc import ProcessSpec, free_port
from kubesim.store import Obj
from kubesim.util import get_path

if TYPE_CHECKING:
    from kubesim.controller import ClusterView

PORT_NAME = "notebook"
BASE_URL_ENV = "GANGWAY_NOTEBOOK_BASE_URL"
GCS_PORT = 6379
# JupyterLab and one kernel: a few hundred MiB; a notebook's own work may want more.
MEMORY_BYTES = 2 << 30


def _notebook_container(pod: Obj) -> tuple[int, str] | None:
    """The pod's notebook port and base URL, when a container follows the convention."""
    for container in get_path(pod, "spec", "containers", default=[]) or []:
        port = next(
            (
                int(p["containerPort"])
                for p in container.get("ports") or []
                if p.get("name") == PORT_NAME and p.get("containerPort")
            ),
            None,
        )
        env = {e.get("name"): e.get("value") for e in container.get("env") or []}
        base = env.get(BASE_URL_ENV)
        if port is not None and base:
            return port, str(base)
    return None


def launch(cluster: ClusterView, pod: Obj) -> list[ProcessSpec]:
    """JupyterLab for a Ray head pod following the notebook convention, else nothing."""
    labels = pod["metadata"].get("labels") or {}
    found = _notebook_container(pod)
    root = cluster.localprocs.root
    if labels.get("ray.io/node-type") != "head" or found is None or root is None:
        return []
    pod_port, base = found
    namespace, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
    workdir = root / namespace / name / "notebook"
    # The notebook's files, apart from Jupyter's state and the process's output.
    files = workdir / "home"
    files.mkdir(parents=True, exist_ok=True)
    port = free_port()
    env = {
        # Jupyter's settings, runtime files and IPython's profile stay in the workdir:
        # nothing of the machine's own Jupyter is read or written.
        "JUPYTER_CONFIG_DIR": str(workdir / "config"),
        "JUPYTER_RUNTIME_DIR": str(workdir / "runtime"),
        "IPYTHONDIR": str(workdir / "ipython"),
        "JUPYTER_PLATFORM_DIRS": "1",
    }
    gcs = cluster.localprocs.address(namespace, name, GCS_PORT)
    if gcs is not None:
        env["RAY_ADDRESS"] = f"{gcs[0]}:{gcs[1]}"
    argv = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--no-browser",
        "--allow-root",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--ServerApp.base_url={base}",
        f"--ServerApp.root_dir={files}",
        "--ServerApp.allow_remote_access=True",
        "--IdentityProvider.token=",
        # No calls out of a simulator's notebook: no extension manager on PyPI, no news.
        "--LabApp.extension_manager=readonly",
        "--LabApp.news_url=None",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    ]
    return [
        ProcessSpec(
            name="notebook", argv=argv, env=env, ports={pod_port: port}, memory_bytes=MEMORY_BYTES
        )
    ]
