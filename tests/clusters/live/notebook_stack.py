"""A stack with a real JupyterLab: kubesim running local processes (its notebook launcher
starts ``jupyter lab`` behind the head pod), bob's dev cluster asked with ``notebook``,
and the web server as ``make run`` starts it (uvicorn, so WebSockets pass), serving the
product on ``127.0.0.1`` and the clusters' origin on ``localhost`` of the same port.
``real_ray_notebook_stack`` is the same with real Ray behind the cluster (``real_ray=1``,
two one-GPU workers as real Ray nodes), so that ``ray.init()`` in a notebook joins it.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
from django.conf import settings as django_settings
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from benchmarks.support import Processes, production_env, wait_http
from clusters.engine import provisioning
from clusters.kube.gateway import get_gateway
from clusters.kube.notebook import NOTEBOOK_PORT_NAME, base_url
from clusters.kube.raydash import head_service
from clusters.models import ClusterRequest
from kubesim import KubeSim
from scripts.run import web_command
from tests.clusters.engine.conftest import wait_for
from tests.clusters.live.conftest import head_ready
from tests.frontend.conftest import make_ready

# The web server's ports: this suite's own range, a slice per xdist worker (two workers
# probing one range at once could both pick the same free port).
WEB_PORTS = range(18720, 18760)
_SLICE = 10
NAME = "bob-nb"


@dataclass(frozen=True)
class Stack:
    """The running pieces: the product's and the origin's URLs, the cluster, kubesim."""

    product: str
    origin: str
    cluster: ClusterRequest
    sim: KubeSim

    @property
    def notebook(self) -> str:
        """JupyterLab's URL on the origin (its base URL)."""
        return self.origin + base_url("acme", NAME)


def _free_web_port() -> int:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    first = WEB_PORTS.start + (int(worker) if worker.isdigit() else 0) * _SLICE
    ports = range(first, min(first + _SLICE, WEB_PORTS.stop))
    for port in ports:
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise AssertionError(f"no free port in {ports}")


def _jupyter_answers(cluster: ClusterRequest) -> bool:
    path = base_url("acme", cluster.name).lstrip("/") + "api/kernels"
    answer = get_gateway().service_proxy(
        "GET", cluster.namespace, head_service(cluster.name), NOTEBOOK_PORT_NAME, path
    )
    answer.read(65536)
    return answer.status == 200


@pytest.fixture
def notebook_stack(
    tmp_path: Path, settings: Any, bob: Any, request_cluster: Any, monkeypatch: Any
) -> Iterator[Stack]:
    with _stack(tmp_path, settings, bob, request_cluster, monkeypatch) as stack:
        yield stack


@pytest.fixture
def real_ray_notebook_stack(
    tmp_path: Path, settings: Any, bob: Any, request_cluster: Any, monkeypatch: Any
) -> Iterator[Stack]:
    with _stack(tmp_path, settings, bob, request_cluster, monkeypatch, real_ray=True) as stack:
        yield stack


# A real head on a busy two-core machine takes up to a couple of minutes to answer.
REAL_START_TIMEOUT = 400.0


@contextmanager
def _stack(
    tmp_path: Path,
    settings: Any,
    bob: Any,
    request_cluster: Any,
    monkeypatch: Any,
    *,
    real_ray: bool = False,
) -> Iterator[Stack]:
    from tests.frontend.browser import quiet_nudges

    quiet_nudges(monkeypatch)
    procs = str(tmp_path / "procs")
    sim = KubeSim(fleet=None, port=0, procs_root=procs, real_ray=int(real_ray)).start()
    processes = Processes(tmp_path)
    start = REAL_START_TIMEOUT if real_ray else 30
    try:
        kubeconfig = tmp_path / "kubeconfig"
        sim.write_kubeconfig(str(kubeconfig))
        settings.KUBECONFIG = str(kubeconfig)
        workers = 2 if real_ray else 1
        cluster = make_ready(request_cluster(bob, name=NAME, notebook=True, workers=workers))
        ClusterRequest.objects.filter(pk=cluster.pk).update(ready_at=timezone.now())
        cluster = ClusterRequest.objects.select_related("tenant", "owner", "flavor").get(
            pk=cluster.pk
        )
        provisioning.apply_cluster(cluster, get_gateway())
        wait_for(lambda: head_ready(cluster), timeout=start, what="the head pod to be ready")
        if real_ray:
            # Every worker a real Ray node too: the RayCluster is ready once all its pods are.
            wait_for(
                lambda: _rc_state(sim, cluster) == "ready",
                timeout=start,
                what=lambda: f"the workers to join: {_rc_state(sim, cluster)}",
            )
        wait_for(
            lambda: _jupyter_answers(cluster),
            timeout=start if real_ray else 90,
            what=lambda: (
                "JupyterLab through the service proxy: "
                + _log(tmp_path / "procs" / cluster.namespace)
            ),
        )
        port = _free_web_port()
        product, origin = f"http://127.0.0.1:{port}", f"http://localhost:{port}"
        db = django_settings.DATABASES["default"]
        env = production_env(
            DATABASE_URL=f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
            KUBECONFIG=str(kubeconfig),
            GANGWAY_VAR_DIR=str(tmp_path),
            RAY_PROXY_ORIGIN=origin,
            PUBLIC_BASE_URL=product,
            # Plain http on loopback, as make run serves it.
            SESSION_COOKIE_SECURE="0",
            CSRF_COOKIE_SECURE="0",
        )
        settings.SECRET_KEY = env["SECRET_KEY"]  # sessions made here hold there
        processes.start("web", web_command(port), env)
        wait_http(f"{product}/healthz", timeout=60)
        yield Stack(product, origin, cluster, sim)
    finally:
        processes.stop()
        sim.stop()
        if os.environ.get("SHOW_WEB_LOG") and (tmp_path / "web.log").exists():
            print((tmp_path / "web.log").read_text()[-5000:])


def _rc_state(sim: KubeSim, cluster: ClusterRequest) -> str:
    rc = sim.get("rayclusters.ray.io", cluster.namespace, cluster.name)
    return str(((rc or {}).get("status") or {}).get("state") or "")


def _log(where: Path) -> str:
    logs = sorted(where.glob("*/notebook/output.log"))
    return logs[0].read_text()[-2000:] if logs else "no notebook process started"


def signed_in(stack: Stack, username: str) -> requests.Session:
    """A ``requests`` session signed in to the product (a session made here, valid
    there: same database and secret key)."""
    client = Client()
    client.force_login(get_user_model().objects.get(username=username))
    session = requests.Session()
    cookie = client.cookies[django_settings.SESSION_COOKIE_NAME]
    session.cookies.set(cookie.key, cookie.value, domain="127.0.0.1", path="/")
    return session
