"""The gangway Django project: settings, URLs, the Celery app and the REST framework base."""

from controlplane.celery import app as celery_app

__all__ = ["celery_app"]
