"""The real loop for engine tests: kubesim over HTTP and a real Celery worker process.

The worker is a separate ``celery worker -B`` process on Redis, pointed at the test
database and at an in-process kubesim through a kubeconfig — the same gateway code
production uses. Tests use ``transactional_db`` so that the worker sees their rows.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from benchmarks.support import CeleryProcess, engine_env
from kubesim import KubeSim
from kubesim.fleet import load_fleet
from tests.clusters.engine.growing_fleet import make_h100_growable

ROOT = Path(__file__).resolve().parents[3]


def wait_for(
    predicate: Callable[[], Any], *, timeout: float = 60.0, what: str | Callable[[], str] = ""
) -> Any:
    """Poll ``predicate`` until it returns something truthy; fail with ``what`` otherwise
    (a callable ``what`` is asked at the failure: it can say where things stood)."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(0.1)
    said = what() if callable(what) else what
    raise AssertionError(f"timed out after {timeout}s waiting for {said or predicate}: {last!r}")


def room_for_l4(tenant: Any, l4: Any, gpus: int) -> None:
    """Per-engineer caps out of the way, an L4 quota of ``gpus`` (none borrowed) and
    nodes enough for it."""
    from tenants.models import Quota

    tenant.max_dev_clusters_per_user = 100
    tenant.max_dev_gpus_per_user = 100
    tenant.save()
    Quota.objects.filter(tenant=tenant, flavor=l4).update(gpus=gpus, borrow_limit=0)
    l4.node_count = 100
    l4.save()


def device_plugin_fleet() -> dict[str, Any]:
    """The demo fleet less its H100 node that NVIDIA's DRA driver manages: the nodes that
    advertise nvidia.com/gpu, for tests that count an extended-resource flavor's nodes
    (which flavor counts a DRA-managed node is the DRA capacity view's: docs/dra.md)."""
    demo = load_fleet(None)
    return {**demo, "pools": [p for p in demo["pools"] if "mig" not in p]}


@contextmanager
def running_kubesim(
    tmp_path: Path,
    settings: Any,
    *,
    kueue: bool = False,
    kai: bool = False,
    procs_root: str | None = None,
    fleet: dict[str, Any] | None = None,
    real_ray: int | None = None,
) -> Iterator[KubeSim]:
    """A kubesim over HTTP on its default fleet or ``fleet`` (with Kueue's emulation and
    ``QUEUE_MODE=kueue`` when ``kueue``, KAI's and ``KAI_ENABLED`` when ``kai``; real
    processes behind pods under ``procs_root``, real Ray for ``real_ray`` RayClusters),
    the test's settings pointed at it through a kubeconfig; stopped after."""
    if kueue:
        settings.QUEUE_MODE = "kueue"
    if kai:
        settings.KAI_ENABLED = True
    sim = KubeSim(
        fleet=fleet,
        port=0,
        startup_delay=0.0,
        kueue=kueue,
        kai=kai,
        procs_root=procs_root,
        real_ray=real_ray,
    ).start()
    kubeconfig = tmp_path / "kubeconfig"
    sim.write_kubeconfig(str(kubeconfig))
    settings.KUBECONFIG = str(kubeconfig)
    try:
        yield sim
    finally:
        sim.stop()


@pytest.fixture
def kubesim(tmp_path: Path, settings: Any) -> Iterator[KubeSim]:
    with running_kubesim(tmp_path, settings) as sim:
        yield sim


# The tests' worker: one solo process with beat embedded (benchmarks/support.py).
Worker = CeleryProcess


@contextmanager
def engine_worker(
    tmp_path: Path,
    *,
    beat: bool = True,
    pool: str = "solo",
    concurrency: int = 1,
    **overrides: str,
) -> Iterator[Worker]:
    """A real worker process on a queue of its own, pointed at the test database and
    the kubesim of the test's settings; ``overrides`` go into its environment. ``pool``
    and ``concurrency`` are Celery's (``threads``, 2: as deploy/ runs it)."""
    from controlplane.celery import app

    db = settings.DATABASES["default"]
    queue = f"test-{uuid.uuid4().hex[:8]}"
    app.conf.task_default_queue = queue
    env = engine_env(
        database_url=f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
        kubeconfig=settings.KUBECONFIG,
        queue=queue,
        var_dir=str(tmp_path),
        QUEUE_MODE=settings.QUEUE_MODE,
        KAI_ENABLED="1" if settings.KAI_ENABLED else "0",
        RAY_IMAGE_ALLOWLIST=",".join(settings.RAY_IMAGE_ALLOWLIST),
        CONTAINER_GPUS_SECCOMP_PROFILE=settings.CONTAINER_GPUS_SECCOMP_PROFILE,
        **overrides,
    )
    handle = Worker(env, tmp_path / "worker.log", pool=pool, concurrency=concurrency, beat=beat)
    handle.start()
    try:
        yield handle
    finally:
        handle.stop()
        app.conf.task_default_queue = settings.CELERY_TASK_DEFAULT_QUEUE
        if os.environ.get("SHOW_WORKER_LOG"):
            print(handle.log.read_text()[-5000:])


@pytest.fixture
def worker(transactional_db: Any, kubesim: KubeSim, tmp_path: Path) -> Iterator[Worker]:
    with engine_worker(tmp_path) as handle:
        yield handle


@pytest.fixture
def growing(h100: Any, acme: Any) -> Any:
    """The H100 flavor as a growable fleet has it (:func:`make_h100_growable`)."""
    return make_h100_growable(h100, acme)
