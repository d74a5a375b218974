"""Leave room on each page of the requests table for rewritten rows (PostgreSQL only).

Every admission pass rewrites the queue fields of most waiting requests (positions move
as fair shares change). None of those columns is indexed, so PostgreSQL can write the new
version on the same page without touching the table's dozen indexes (a HOT update), but
only if the page has room for it. On the 15,000-request benchmark queue, the share of a
pass's updates that were HOT: 0-18% at the default fill factor (100), 60-85% at 70, 99%
at 50, where the UPDATE took about 0.15-0.2 s against 0.25-0.3 s at 70 and 0.4 s or more
at 100. The price is a heap up to twice as large for rows never rewritten. New and moved
rows take the setting at once; a table rewrite (VACUUM FULL, pg_repack) applies it to
the old pages.
"""

from django.db import migrations

TABLE = "clusters_clusterrequest"


def _on_postgresql(sql):
    """SQLite (``make run``) has no fill factor."""

    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.execute(sql)

    return run


class Migration(migrations.Migration):

    dependencies = [
        ("clusters", "0032_flavor_prices_and_cost_caps"),
    ]

    operations = [
        migrations.RunPython(
            _on_postgresql(f"ALTER TABLE {TABLE} SET (fillfactor = 50)"),
            _on_postgresql(f"ALTER TABLE {TABLE} RESET (fillfactor)"),
        ),
    ]
