"""The indexes of the tables every request and state change writes: only those a query
needs. A change of state writes a new row version into every index of the table, several
times per cluster in a burst (docs/benchmarks.md, end to end)."""

from __future__ import annotations

import pytest
from django.db import connection

pytestmark = pytest.mark.django_db

HOT_TABLES = ["clusters_clusterrequest", "clusters_clusterevent", "tenants_auditevent"]


def _indexes(table: str) -> dict[str, tuple[list[str], str]]:
    """Index name -> (columns, definition) of ``table``, from PostgreSQL itself."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = %s", [table])
        rows = cursor.fetchall()
    constraints = connection.introspection.get_constraints(connection.cursor(), table)
    return {name: (constraints[name]["columns"], definition) for name, definition in rows}


@pytest.mark.parametrize("table", HOT_TABLES)
def test_no_index_is_a_like_only_twin_or_a_prefix_of_another(table: str) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("reads PostgreSQL's catalogue (the production database)")
    indexes = _indexes(table)
    like_only = [name for name, (_, definition) in indexes.items() if "pattern_ops" in definition]
    assert like_only == [], f"nothing filters {table} with LIKE: {like_only}"
    plain = {
        name: columns
        for name, (columns, definition) in indexes.items()
        # Unique and partial indexes enforce or narrow something a prefix cannot.
        if "UNIQUE" not in definition and " WHERE " not in definition
    }
    for name, columns in plain.items():
        for other, longer in indexes.items():
            # A partial index covers only some rows: its prefix is no index of the rest.
            if other != name and len(longer[0]) > len(columns) and " WHERE " not in longer[1]:
                assert longer[0][: len(columns)] != columns, (
                    f"{name} {columns} only repeats the leading columns of {other} {longer[0]}"
                )


def test_the_state_lookups_still_have_an_index() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("reads PostgreSQL's catalogue (the production database)")
    leading = [columns[0] for columns, _ in _indexes("clusters_clusterrequest").values()]
    assert "state" in leading and "workload" in leading
    assert "action" in [columns[0] for columns, _ in _indexes("tenants_auditevent").values()]
