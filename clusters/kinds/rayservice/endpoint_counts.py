"""Requests through services' endpoints, counted cheaply and exactly.

Each relayed request is one increment of a per-service counter in the cache (Redis in
production); at most every :data:`FLUSH_SECONDS` per service, the request that finds
the flush lock free moves the counter's value into ``Service.requests_total`` with one
UPDATE. What is shown is the stored total plus what still waits in the counter, so a
count is never lost between flushes nor counted twice. The time of the last request
is kept beside it (and flushed to ``Service.last_request_at``): scale to zero reads it.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable

from django.core.cache import cache
from django.db.models import F, Value
from django.db.models.functions import Coalesce, Greatest
from django.utils import timezone

from clusters.models import Service

FLUSH_SECONDS = 5


def _key(service_id: int) -> str:
    return f"serve:requests:{service_id}"


def _last_key(service_id: int) -> str:
    return f"serve:last:{service_id}"


def request_seen(service_id: int, at: datetime.datetime | None = None) -> None:
    """Record ``at`` (now) as the service's last request, without counting one."""
    cache.set(_last_key(service_id), (at or timezone.now()).timestamp(), timeout=None)


def last_requests(service_ids: Iterable[int]) -> dict[int, datetime.datetime]:
    """The last request of each service the cache holds one of (not yet flushed, or since)."""
    keys = {_last_key(pk): pk for pk in service_ids}
    found = cache.get_many(list(keys))
    return {keys[k]: datetime.datetime.fromtimestamp(v, tz=datetime.UTC) for k, v in found.items()}


def pending(service_id: int) -> int:
    """Requests counted in the cache and not yet flushed to the row."""
    return int(cache.get(_key(service_id)) or 0)


def request_counted(service_id: int) -> None:
    """Count one request of the service; flush the counter to its row when due."""
    request_seen(service_id)
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
    last = last_requests([service_id]).get(service_id) or timezone.now()
    try:
        Service.objects.filter(pk=service_id).update(
            requests_total=F("requests_total") + count,
            last_request_at=Greatest(Coalesce("last_request_at", Value(last)), Value(last)),
        )
    except Exception:
        cache.incr(key, count)
        raise
    return count


def requests_total(service: Service) -> int:
    """The service's requests: stored plus pending."""
    return service.requests_total + pending(service.pk)
