"""The Celery application.

Configuration lives in Django settings under the ``CELERY_`` prefix. Tasks are thin:
they take a primary key, re-read the row and call services (STYLE 6).
"""

from __future__ import annotations

import os
import time
from typing import Any

from celery import Celery
from celery.signals import task_postrun, task_prerun, worker_process_shutdown, worker_ready

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")

app = Celery("gangway")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@task_prerun.connect
@task_postrun.connect
def close_old_connections(sender: Any = None, **kwargs: Any) -> None:
    """Around every task, what Django does around every request: close a connection
    that failed or outlived ``CONN_MAX_AGE``; a kept one is health-checked first."""
    # An eager task runs inside its caller's transaction: its connection is the caller's.
    if getattr(getattr(sender, "request", None), "is_eager", False):
        return
    from django.db import close_old_connections as close

    close()


# When each running task started (by task id), for gangway_celery_task_seconds.
_started: dict[str, float] = {}


@task_prerun.connect
def _task_started(task_id: str = "", **kwargs: Any) -> None:
    _started[task_id] = time.perf_counter()


@task_postrun.connect
def _task_ended(
    task_id: str = "", task: Any = None, state: str | None = None, **kwargs: Any
) -> None:
    """Observe the task's run time, by its registered name (a bounded label) and state."""
    started = _started.pop(task_id, None)
    if started is None or task is None:
        return
    from controlplane import metrics

    metrics.TASK_SECONDS.labels(task.name, state or "UNKNOWN").observe(
        time.perf_counter() - started
    )


@worker_process_shutdown.connect
def _process_exited(**kwargs: Any) -> None:
    """A worker process's live gauge files go with it (multi-process metrics)."""
    from controlplane import metrics

    metrics.process_exited(os.getpid())


@worker_ready.connect
def _serve_metrics(**kwargs: Any) -> None:
    """The worker's own /metrics when WORKER_METRICS_PORT is set (a worker pod)."""
    from django.conf import settings

    if settings.WORKER_METRICS_PORT:
        from controlplane.worker_metrics import serve

        serve(settings.WORKER_METRICS_PORT)
