"""The Celery application.

Configuration lives in Django settings under the ``CELERY_`` prefix. Tasks are thin:
they take a primary key, re-read the row and call services (STYLE 6).
"""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")

app = Celery("gangway")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
