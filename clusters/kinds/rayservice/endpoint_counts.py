"""Requests through services' endpoints, counted cheaply and exactly.

Each relayed request is one increment of a per-service counter in the cache (Redis in
production); at most every :data:`FLUSH_SECONDS` per service, the request that finds
the flush lock free moves the counter's value into ``Service.requests_total`` with one
UPDATE. What is shown is the stored total plus what still waits in the counter, so a
count is never lost between flushes nor counted twice.
"""

from __future__ import annotations

from django.core.cache import cache
from django.db.models import F

from clusters.models import Service

FLUSH_SECONDS = 5


def _key(service_id: int) -> str:
    return f"serve:requests:{service_id}"


def pending(service_id: int) -> int:
    """Requests counted in the cache and not yet flushed to the row."""
    return int(cache.get(_key(service_id)) or 0)


def request_counted(service_id: int) -> None:
    """Count one request of the service; flush the counter to its row when due."""
    key = _key(service_id)
    cache.add(key, 0, timeout=None)
    try:
        cache.incr(key)
    except ValueError:  # evicted between add and incr: start it again
        cache.set(key, 1, timeout=None)
    if cache.add(f"serve:flushed:{service_id}", 1, timeout=FLUSH_SECONDS):
        requests_flush(service_id)


def requests_flush(service_id: int) -> int:
    """Move the service's counted requests to ``Service.requests_total``; how many."""
    key = _key(service_id)
    count = pending(service_id)
    if count <= 0:
        return 0
    # Taken off the counter first (increments racing this stay on it), then stored; a
    # failing UPDATE puts them back.
    cache.decr(key, count)
    try:
        Service.objects.filter(pk=service_id).update(requests_total=F("requests_total") + count)
    except Exception:
        cache.incr(key, count)
        raise
    return count


def requests_total(service: Service) -> int:
    """The service's requests: stored plus pending."""
    return service.requests_total + pending(service.pk)
