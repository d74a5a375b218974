"""Project system checks (``manage.py check``; the deploy ones with ``--deploy``)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Tags, Warning, register


@register(Tags.security, Tags.caches, deploy=True)
def shared_cache(app_configs: Any, **kwargs: Any) -> list[CheckMessage]:
    """Sign-in lockouts and API throttles count in the cache: in a process-local cache
    each gunicorn worker and pod keeps its own count, multiplying every limit."""
    backend = settings.CACHES["default"]["BACKEND"]
    if backend != "django.core.cache.backends.locmem.LocMemCache":
        return []
    return [
        Warning(
            "The cache is local to each process, so sign-in lockouts and API throttles "
            "are counted per gunicorn worker.",
            hint="Set CACHE_URL to a Redis that every web process shares.",
            id="gangway.W001",
        )
    ]
