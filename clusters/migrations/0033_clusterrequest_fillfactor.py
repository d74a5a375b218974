"""Leave room on each page of the requests table for rewritten rows (PostgreSQL only).

Every admission pass rewrites the queue fields of most waiting requests (positions move
as fair shares change). None of those columns is indexed, so PostgreSQL can write the new
version on the same page without touching the table's dozen indexes (a HOT update), but
only if the page has room: at the default fill factor (100) it seldom has, and the pass's
UPDATE of 15,000 rows cost 0.4 s; at 70, about 0.25 s. New and moved rows take the setting
at once; a table rewrite (VACUUM FULL, pg_repack) applies it to the old pages.
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
            _on_postgresql(f"ALTER TABLE {TABLE} SET (fillfactor = 70)"),
            _on_postgresql(f"ALTER TABLE {TABLE} RESET (fillfactor)"),
        ),
    ]
