"""The real loop for engine tests: kubesim over HTTP and a real Celery worker process.

The worker is a separate ``celery worker -B`` process on Redis, pointed at the test
database and at an in-process kubesim through a kubeconfig — the same gateway code
production uses. Tests use ``transactional_db`` so that the worker sees their rows.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from kubesim import KubeSim

ROOT = Path(__file__).resolve().parents[3]


def wait_for(predicate: Callable[[], Any], *, timeout: float = 60.0, what: str = "") -> Any:
    """Poll ``predicate`` until it returns something truthy; fail with ``what`` otherwise."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate}: {last!r}")


@contextmanager
def running_kubesim(tmp_path: Path, settings: Any, *, kueue: bool = False) -> Iterator[KubeSim]:
    """An empty kubesim over HTTP (with Kueue's emulation and ``QUEUE_MODE=kueue`` when
    ``kueue``), the test's settings pointed at it through a kubeconfig; stopped after."""
    if kueue:
        settings.QUEUE_MODE = "kueue"
    sim = KubeSim(fleet=None, port=0, startup_delay=0.0, kueue=kueue).start()
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


class Worker:
    """A real Celery worker (with embedded beat) in its own process."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.env = env
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        schedule = Path(self.env["GANGWAY_VAR_DIR"]) / f"beat-{uuid.uuid4().hex}"
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "celery",
                    "-A",
                    "controlplane",
                    "worker",
                    "-B",
                    "--pool",
                    "solo",
                    "--loglevel",
                    "INFO",
                    "-Q",
                    self.env["CELERY_QUEUE"],
                    "--schedule",
                    str(schedule),
                    "--without-heartbeat",
                    "--without-gossip",
                    "--without-mingle",
                ],
                cwd=ROOT,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def kill(self) -> None:
        """SIGKILL the worker: no warm shutdown, no chance to ack or requeue anything."""
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()


@pytest.fixture
def worker(transactional_db: Any, kubesim: KubeSim, tmp_path: Path) -> Iterator[Worker]:
    from controlplane.celery import app

    db = settings.DATABASES["default"]
    queue = f"test-{uuid.uuid4().hex[:8]}"
    app.conf.task_default_queue = queue
    env = dict(os.environ)
    env.update(
        DATABASE_URL=f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
        DATABASE_CONN_MAX_AGE="0",
        KUBECONFIG=settings.KUBECONFIG,
        CELERY_QUEUE=queue,
        GANGWAY_VAR_DIR=str(tmp_path),
        RECONCILE_INTERVAL_SECONDS="0.5",
        SWEEP_INTERVAL_SECONDS="1",
        SWEEP_STALE_SECONDS="2",
        KUBE_REQUEST_TIMEOUT_SECONDS="5",
        QUEUE_MODE=settings.QUEUE_MODE,
        KAI_ENABLED="1" if settings.KAI_ENABLED else "0",
        RAY_IMAGE_ALLOWLIST=",".join(settings.RAY_IMAGE_ALLOWLIST),
        CONTAINER_GPUS_SECCOMP_PROFILE=settings.CONTAINER_GPUS_SECCOMP_PROFILE,
        DEBUG="1",
    )
    handle = Worker(env, tmp_path / "worker.log")
    handle.start()
    try:
        yield handle
    finally:
        handle.stop()
        app.conf.task_default_queue = settings.CELERY_TASK_DEFAULT_QUEUE
        if os.environ.get("SHOW_WORKER_LOG"):
            print(handle.log.read_text()[-5000:])
