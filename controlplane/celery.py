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
    """Around every task, what Django does around every request: close a connection
    that failed or outlived ``CONN_MAX_AGE``; a kept one is health-checked first."""
    # An eager task runs inside its caller's transaction: its connection is the caller's.
    if getattr(getattr(sender, "request", None), "is_eager", False):
        return
    from django.db import close_old_connections as close

    close()
