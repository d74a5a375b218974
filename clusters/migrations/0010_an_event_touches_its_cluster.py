"""On PostgreSQL, inserting events writes a new version of each of their clusters' rows.

The cluster list's cache (clusters/api/listcache.py) keys a page by a fingerprint of the
row versions (``xmin``, ``ctid``) of the tenant's clusters. An event is part of what a
list item shows (its last event), and an event can be written without its cluster's row
(``transitions.note``, or any other way). This trigger makes the event's insert touch
its cluster's row in the same transaction (``SET id = id``: a new row version and
nothing else changed), so the fingerprint no longer reads the events table at all: it
used to scan every event of the tenant's clusters on every list request, a cost that
grew with the tenant's history.

One ``UPDATE`` per insert statement (a statement trigger with a transition table), so a
bulk insert of a thousand events touches its thousand rows at once. SQLite (``make
run``) has no list cache and gets no trigger.
"""

from django.db import migrations

FUNCTION = "gangway_event_touches_cluster"
TRIGGER = "clusters_clusterevent_touches_cluster"

CREATE = f"""
CREATE OR REPLACE FUNCTION {FUNCTION}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE clusters_clusterrequest SET id = id
    WHERE id IN (SELECT DISTINCT cluster_id FROM inserted_events);
    RETURN NULL;
END
$$;
CREATE TRIGGER {TRIGGER}
    AFTER INSERT ON clusters_clusterevent
    REFERENCING NEW TABLE AS inserted_events
    FOR EACH STATEMENT EXECUTE FUNCTION {FUNCTION}();
"""

DROP = f"""
DROP TRIGGER IF EXISTS {TRIGGER} ON clusters_clusterevent;
DROP FUNCTION IF EXISTS {FUNCTION}();
"""


def _on_postgresql(sql):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.execute(sql)

    return run


class Migration(migrations.Migration):
    dependencies = [
        ("clusters", "0009_queue_hold"),
    ]

    operations = [
        migrations.RunPython(_on_postgresql(CREATE), _on_postgresql(DROP)),
    ]
