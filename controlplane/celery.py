"""The Celery application.

Configuration lives in Django settings under the ``CELERY_`` prefix. Tasks are thin:
they take a primary key, re-read the row and call services (STYLE 6).
"""

from __future__ import annotations

import os
from typing import Any

from celery import Celery
from celery.signals import task_postrun, task_prerun

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")

app = Celery("gangway")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@task_prerun.connect
@task_postrun.connect
def close_old_connections(sender: Any = None, **kwargs: Any) -> None:
    """Around every task, what Django does around every request: close a database
    connection that failed or is older than ``CONN_MAX_AGE``, and have a kept one
    health-checked before its first query (``CONN_HEALTH_CHECKS``). Celery's own
    per-task close is relaxed by ``CELERY_DB_REUSE_MAX`` (settings).

    Not for a task run inline (eagerly): it runs inside its caller's transaction, as
    Celery's fix-up leaves it too.
    """
    if getattr(getattr(sender, "request", None), "is_eager", False):
        return
    from django.db import close_old_connections as close

    close()
