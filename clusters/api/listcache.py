"""A page of a tenant's cluster list, served again while nothing it shows has changed.

Dashboards poll the list and rendering a page costs tens of milliseconds of CPU. A page
is kept under a *fingerprint* PostgreSQL computes in one small query: the count and sum
of the listable rows' ``(xmin, ctid)`` hashes, so any write by anyone makes a new key (an
event's insert rewrites its cluster's row: a trigger, migration 0010). Idle minutes, the
clock's part, are brought up to date when a page is served (:func:`get`). The key holds
the whole URL and media type; an entry is the rendered bytes. SQLite renders afresh.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.db import connection
from django.utils import timezone

from clusters.domain.states import State
from clusters.models import ClusterRequest, KubeCluster
from clusters.selectors import idle_minutes
from tenants.models import GpuFlavor, Tenant

# The version in the key changes with what an entry holds (a Page of rendered bytes), so
# a process running other code never reads an entry it cannot use.
_KEY_PREFIX = "cluster-list:v2"


def _version_sql() -> str:
    clusters = ClusterRequest._meta.db_table
    tenants = Tenant._meta.db_table
    flavors = GpuFlavor._meta.db_table
    users = get_user_model()._meta.db_table
    members = KubeCluster._meta.db_table
    version = "hashtextextended(xmin::text || ctid::text, 0)"
    # Only the rows a list can show (it never shows a deleted request): a tenant's
    # history of deleted requests would otherwise make every list read cost more the
    # longer the tenant has been running. One scan of them gives the count, the sum of
    # their versions and their owners.
    return (
        f"WITH live AS (SELECT count(*) AS n, sum({version}) AS versions, "
        f"array_agg(DISTINCT owner_id) AS owners FROM {clusters} "
        f"WHERE tenant_id = %(t)s AND state <> '{State.DELETED}') "
        f"SELECT n, versions, "
        f"(SELECT sum({version}) FROM {tenants} WHERE id = %(t)s), "
        f"(SELECT sum({version}) FROM {flavors}), "
        f"(SELECT sum({version}) FROM {users} WHERE id = ANY(live.owners)), "
        # Which members of the fleet are unreachable (their rows show as stale); not
        # their versions, which every reconcile pass changes.
        f"(SELECT string_agg(id::text, ',' ORDER BY id) FROM {members} "
        f"WHERE reachable IS FALSE) "
        f"FROM live"
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


def key(tenant: Tenant, url: str, media_type: str, version: str) -> str:
    """The cache key of the page at ``url`` (absolute) of ``tenant`` at ``version``,
    rendered as ``media_type`` (its parameters, such as ``indent``, change the bytes)."""
    digest = hashlib.sha256(f"{url}\n{media_type}\n{version}".encode()).hexdigest()
    return f"{_KEY_PREFIX}:{tenant.pk}:{digest}"


@dataclass(frozen=True)
class Page:
    """A rendered page as kept in the cache: its bytes, and for each idle ready cluster
    on it, its index in ``results``, the instant its idle minutes count from and the
    minutes the bytes show."""

    body: bytes
    clock: tuple[tuple[int, datetime, int], ...]


Render = Callable[[Any], bytes]


def get(cache_key: str, *, render: Render, now: datetime | None = None) -> bytes | None:
    """The page kept under ``cache_key`` as of ``now``, or ``None``.

    While the clock has not moved any idle minutes the page shows, it is the kept bytes
    as they are (no parsing, no rendering). When it has, the page is parsed, brought up
    to ``now``, rendered again with ``render`` and kept anew.
    """
    page: Page | None = cache.get(cache_key)
    if page is None:
        return None
    now = now or timezone.now()
    if all(idle_minutes(since, now) == shown for _, since, shown in page.clock):
        return page.body
    data = json.loads(page.body)
    for index, since, _ in page.clock:
        data["results"][index]["activity"]["idle_minutes"] = idle_minutes(since, now)
    body = render(data)
    _keep(cache_key, body, [(i, since, idle_minutes(since, now)) for i, since, _ in page.clock])
    return body


def put(cache_key: str, data: Any, body: bytes) -> None:
    """Keep ``body``, the rendering of ``data`` (a list response's data, every list is
    paginated: controlplane.api.pagination), under ``cache_key`` for
    ``CLUSTER_LIST_CACHE_SECONDS``. What the clock alone changes in it, the idle minutes
    of its idle ready clusters (:func:`clusters.selectors.cluster_activity` computes the
    rest from the rows, which the fingerprint covers), is noted beside it for :func:`get`."""
    clock = []
    for index, item in enumerate(data["results"]):
        activity = item.get("activity")
        if activity and not activity["active"] and activity["last_active_at"] is not None:
            clock.append((index, activity["last_active_at"], activity["idle_minutes"]))
    _keep(cache_key, body, clock)


def _keep(cache_key: str, body: bytes, clock: list[tuple[int, datetime, int]]) -> None:
    page = Page(body=body, clock=tuple(clock))
    cache.set(cache_key, page, timeout=settings.CLUSTER_LIST_CACHE_SECONDS)
