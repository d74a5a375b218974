"""A worker process keeps its database connection from one task to the next.

Celery's Django fix-up closes the connection around every task unless
``CELERY_DB_REUSE_MAX`` is set; gangway sets it and, like Django around a request,
closes only a connection that failed or outlived ``CONN_MAX_AGE``
(``controlplane/celery.py``). PostgreSQL starts a backend process for every
connection, so a new one per task cost more than many of the tasks.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.db import connection

from clusters.models import PendingPass
from clusters.rows import enqueue
from kubesim import KubeSim
from tests.clusters.engine.conftest import engine_worker, wait_for


def _worker_backends() -> set[tuple[int, Any]]:
    """Every other client connection to the test database: (pid, when it started)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid, backend_start FROM pg_stat_activity WHERE datname = "
            "current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
        )
        return set(cursor.fetchall())


def _one_reconcile_pass() -> None:
    """Ask for a reconcile pass and wait until the worker has started it."""
    assert enqueue.request_pass(enqueue.RECONCILE)
    wait_for(
        lambda: PendingPass.objects.filter(name="reconcile", requested_at=None).exists(),
        what="the pass started",
    )


def test_a_worker_keeps_its_database_connection_between_tasks(
    transactional_db: Any, kubesim: KubeSim, tmp_path: Path
) -> None:
    with engine_worker(
        tmp_path,
        beat=False,  # only the passes this test asks for run
        DATABASE_CONN_MAX_AGE="600",
    ):
        _one_reconcile_pass()
        first = wait_for(_worker_backends, what="the worker's connection")
        seen = [first]
        for _ in range(3):
            _one_reconcile_pass()
            seen.append(_worker_backends())
        # The same backend (pid and start time) served every pass: with a connection per
        # task, each pass would have had a new one.
        kept = set.intersection(*seen)
        assert kept, seen
