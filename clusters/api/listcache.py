"""A page of a tenant's cluster list, served again while nothing it shows has changed.

Rendering a page of 50 clusters through the ORM and DRF costs about 20 ms of CPU, and a
dashboard polls it. What a page shows is a function of the tenant's cluster rows, their
events, the tenant, the flavors and the owners, and, for the idle minutes of ready
clusters, of the clock. The page is kept in the cache under a *fingerprint* of those
rows that PostgreSQL computes in one small query, so that any write to them (through the
ORM, a queryset ``update()``, raw SQL or another process) makes a new key:

* only the rows a list can show count (a deleted request is never listed; deleting one
  takes it out of the count);
* every row version has its own ``(xmin, ctid)``: an ``UPDATE`` writes a new version,
  whatever the columns it sets, so a sum of their hashes changes with any row changed,
  and ``count(*)`` with any row added or removed (``updated_at`` would not do: a
  queryset ``update()`` does not set it);
* events are only ever added: the newest event id of the tenant's listed clusters;
* the clock: the one thing a page shows that changes with time alone, the idle minutes
  of idle ready clusters, is brought up to date each time the page is served
  (:func:`refresh_clock`); an entry lives at most ``CLUSTER_LIST_CACHE_SECONDS``.

The fingerprint is read *before* the page, so an entry is never older than its key. The
key also holds the whole request URL (page, size, filters, ordering and the host the
links are built with). Output does not depend on the caller's role. Only PostgreSQL has
``xmin`` and ``ctid``: elsewhere (SQLite for ``make run``) every list is rendered afresh.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.db import connection
from django.utils import timezone

from clusters.models import ClusterEvent, ClusterRequest
from clusters.selectors import idle_minutes
from clusters.states import State
from tenants.models import GpuFlavor, Tenant

_KEY_PREFIX = "cluster-list:v1"


def _version_sql() -> str:
    clusters = ClusterRequest._meta.db_table
    events = ClusterEvent._meta.db_table
    tenants = Tenant._meta.db_table
    flavors = GpuFlavor._meta.db_table
    users = get_user_model()._meta.db_table
    row = "sum(hashtextextended(xmin::text || ctid::text, 0))"
    # Only the rows a list can show (it never shows a deleted request): a tenant's
    # history of deleted requests and their events would otherwise make every list
    # read cost more the longer the tenant has been running.
    live = f"tenant_id = %(t)s AND state <> '{State.DELETED}'"
    return (
        f"SELECT (SELECT count(*) FROM {clusters} WHERE {live}), "
        f"(SELECT {row} FROM {clusters} WHERE {live}), "
        f"(SELECT max(e.id) FROM {events} e WHERE e.cluster_id IN "
        f"(SELECT id FROM {clusters} WHERE {live})), "
        f"(SELECT {row} FROM {tenants} WHERE id = %(t)s), "
        f"(SELECT {row} FROM {flavors}), "
        f"(SELECT {row} FROM {users} WHERE id IN "
        f"(SELECT owner_id FROM {clusters} WHERE {live}))"
    )


def enabled() -> bool:
    """Whether lists are cached here: on PostgreSQL, unless the setting is 0."""
    return settings.CLUSTER_LIST_CACHE_SECONDS > 0 and connection.vendor == "postgresql"


def fingerprint(tenant: Tenant) -> str:
    """What a page of ``tenant``'s cluster list depends on, as one string (see the
    module's docstring). One query."""
    with connection.cursor() as cursor:
        cursor.execute(_version_sql(), {"t": tenant.pk})
        values = cursor.fetchone()
    return ":".join(str(v) for v in values)


def key(tenant: Tenant, url: str, version: str) -> str:
    """The cache key of the page at ``url`` (absolute) of ``tenant`` at ``version``."""
    digest = hashlib.sha256(f"{url}\n{version}".encode()).hexdigest()
    return f"{_KEY_PREFIX}:{tenant.pk}:{digest}"


def get(cache_key: str, *, now: datetime | None = None) -> Any:
    """The page kept under ``cache_key`` with its idle minutes as of ``now``, or ``None``."""
    data = cache.get(cache_key)
    if data is not None:
        refresh_clock(data, now=now or timezone.now())
    return data


def refresh_clock(data: Any, *, now: datetime) -> None:
    """Bring what the clock alone changes in a page up to ``now``: the idle minutes of
    its idle ready clusters (:func:`clusters.selectors.cluster_activity` computes the
    rest from the rows, which the fingerprint covers). Each item keeps the instant it
    counts from, so this is the same arithmetic as a fresh render."""
    for item in data["results"]:  # every list is paginated (controlplane.api.pagination)
        activity = item.get("activity")
        if activity and not activity["active"] and activity["last_active_at"] is not None:
            activity["idle_minutes"] = idle_minutes(activity["last_active_at"], now)


def put(cache_key: str, data: Any) -> None:
    """Keep ``data`` (a list response's data) under ``cache_key`` for
    ``CLUSTER_LIST_CACHE_SECONDS``."""
    cache.set(cache_key, data, timeout=settings.CLUSTER_LIST_CACHE_SECONDS)
