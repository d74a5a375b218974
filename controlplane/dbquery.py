"""psycopg's cache of parsed queries, widened to the rows gangway writes.

Before it sends a query, psycopg splits the SQL at its ``%s`` placeholders (a regular
expression over the whole text) and keeps the result in a small LRU cache keyed by the
text. It caches only queries of at most 50 parameters, and a cluster request row has 54
columns: every create's INSERT (and every save of a whole row) was split afresh, a tenth
of a create's CPU in the web server. :func:`widen_parsed_query_cache` raises the limit
to 100 parameters at start-up. The cache keeps its bounds: 128 entries, each query at
most 4 KiB long (psycopg's own limit, unchanged), so the long ``IN (...)`` lists of
varying length that the limit keeps out are still kept out by their length.

The limit is a module constant of psycopg (pinned in requirements.txt), read on each
query; tests/controlplane/test_dbquery.py fails if a release stops honouring it.
"""

from __future__ import annotations

# The parameters of the widest row written whole (ClusterRequest: 54 columns), with room.
PARAMETERS = 100


def widen_parsed_query_cache() -> None:
    """Let psycopg cache the parsed form of queries of up to :data:`PARAMETERS`
    parameters (idempotent; never narrows a wider limit)."""
    from psycopg import _queries

    _queries.MAX_CACHED_STATEMENT_PARAMS = max(_queries.MAX_CACHED_STATEMENT_PARAMS, PARAMETERS)
