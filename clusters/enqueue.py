"""Work for the Celery tasks, sent by task name once the current transaction commits.

Services, the admission pass and the engine ask for work through this module instead of
importing :mod:`clusters.tasks`, so that nothing below the tasks imports them (the
layer contracts in ``.importlinter`` hold it). A message carries only a primary key:
the row is the desired state, and a message that never arrives only delays work, since
the sweeper re-sends it (:func:`clusters.tasks.sweep`).
"""

from __future__ import annotations

from celery import current_app
from django.db import transaction

PROVISION = "clusters.tasks.provision_cluster"
ADMISSION_PASS = "clusters.tasks.admission_pass"
RECONCILE = "clusters.tasks.reconcile"


def send(name: str, *args: object) -> None:
    """Send task ``name`` now (eagerly when Celery is configured to run tasks inline)."""
    if current_app.conf.task_always_eager:
        current_app.tasks[name].apply(args=args)
        return
    current_app.send_task(name, args=args)


def after_commit(name: str, *args: object) -> None:
    """Send task ``name`` once the current transaction commits (at once outside one)."""
    transaction.on_commit(lambda: send(name, *args))


def provision(cluster_id: int) -> None:
    """Converge one cluster's Kubernetes objects with its row, after commit."""
    after_commit(PROVISION, cluster_id)


def admission_pass() -> None:
    """Run an admission pass after commit (a no-op task when Kueue decides admission)."""
    after_commit(ADMISSION_PASS)


def reconcile() -> None:
    """Run a reconcile pass after commit."""
    after_commit(RECONCILE)
