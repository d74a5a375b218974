"""psycopg's cache of parsed queries, widened to the rows gangway writes.

psycopg splits each query at its ``%s`` placeholders and caches the result, but only for
queries of at most 50 parameters; a cluster request row has more columns, so every
create's INSERT would be split afresh. :func:`widen_parsed_query_cache` raises the limit
to 100 at start-up; the cache keeps its other bounds (128 entries, 4 KiB a query). The
limit is a psycopg module constant (pinned in requirements.txt);
tests/controlplane/test_dbquery.py fails if a release stops honouring it.
"""

from __future__ import annotations

# The parameters of the widest row written whole (ClusterRequest: 54 columns), with room.
PARAMETERS = 100


def widen_parsed_query_cache() -> None:
    """Let psycopg cache the parsed form of queries of up to :data:`PARAMETERS`
    parameters (idempotent; never narrows a wider limit)."""
    from psycopg import _queries

    _queries.MAX_CACHED_STATEMENT_PARAMS = max(_queries.MAX_CACHED_STATEMENT_PARAMS, PARAMETERS)
