"""controlplane.dbquery: the INSERT of a whole cluster request row (54 columns) is split
at its placeholders once, then served from psycopg's cache of parsed queries."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection

from clusters.models import ClusterRequest

pytestmark = pytest.mark.django_db


def test_a_whole_row_insert_is_parsed_once(acme: Any, bob: Any, h100: Any) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("psycopg's cache (the production driver)")
    from psycopg import _queries

    columns = len(ClusterRequest._meta.concrete_fields) - 1  # all but the id
    assert columns > 50, "the row fits psycopg's own limit: the widening is not needed"
    calls: list[int] = []
    split = _queries._query2pg_client_nocache

    def counted(query: bytes, encoding: str) -> Any:
        if b'INSERT INTO "clusters_clusterrequest"' in query:
            calls.append(1)
        return split(query, encoding)

    # The cache wraps the splitting function it was made with: count what reaches it.
    cached = _queries.lru_cache(counted)
    original = _queries._query2pg_client
    _queries._query2pg_client = cached
    _queries._query2pg_client_nocache = counted
    try:
        for name in ("one", "two", "three"):
            ClusterRequest.objects.create(
                tenant=acme, owner=bob, flavor=h100, name=name, workers=1, gpus=1
            )
    finally:
        _queries._query2pg_client = original
        _queries._query2pg_client_nocache = split
    assert calls == [1], "the INSERT was split again instead of read from the cache"
