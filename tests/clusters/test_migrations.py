"""The squashed migrations of clusters (0001-0022) and tenants (0001-0015): a database
already at the migrations they replace upgrades with nothing to run, and a fresh one
gets what the replaced migrations' data steps gave it (docs/operations.md, "Upgrading")."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.recorder import MigrationRecorder

from clusters.models import PendingPass

SQUASHES = {
    ("clusters", "0001_squashed_0022"): 22,
    ("tenants", "0001_squashed_0015"): 15,
}


def _migrate(target: tuple[str, str | None]) -> Any:
    """Migrate to ``target`` (``(app, None)``: none of the app's) and return its models."""
    executor = MigrationExecutor(connection)
    executor.migrate([target])
    return None if target[1] is None else executor.loader.project_state(target).apps


@pytest.fixture
def back_to_latest() -> Any:
    """Leave the schema at the newest migrations, whatever the test stopped at: a later
    test in the same database needs every table (the next migrations create some)."""
    yield
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


@pytest.mark.django_db
def test_a_database_at_the_replaced_migrations_has_nothing_to_run() -> None:
    """A deployment migrated before the squash recorded only the replaced names."""
    recorder = MigrationRecorder(connection)
    for (app, name), replaced in SQUASHES.items():
        assert len(MigrationExecutor(connection).loader.disk_migrations[app, name].replaces) == (
            replaced
        )
        recorder.migration_qs.filter(app=app, name=name).delete()
    executor = MigrationExecutor(connection)
    assert all(key in executor.loader.applied_migrations for key in SQUASHES)
    assert executor.migration_plan(executor.loader.graph.leaf_nodes()) == []


@pytest.mark.django_db
def test_a_database_half_way_through_the_replaced_migrations_is_refused() -> None:
    """One between two of the replaced migrations must first upgrade to a release that
    still has them: Django will not guess which of the squash's steps it still lacks."""
    recorder = MigrationRecorder(connection)
    recorder.migration_qs.filter(app="clusters", name="0001_squashed_0022").delete()
    recorder.migration_qs.filter(app="clusters", name="0022_service_traffic").delete()
    with pytest.raises(CommandError, match=r"has 21 of the 22 .* lacks 0022_service_traffic"):
        call_command("migrate", verbosity=0)


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures(back_to_latest.__name__)
def test_a_fresh_database_gets_the_pass_rows_and_the_event_trigger() -> None:
    _migrate(("clusters", None))
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_trigger WHERE tgname = %s", [TRIGGER])
        assert cursor.fetchone() == (0,)
    _migrate(("clusters", "0001_squashed_0022"))
    assert set(PendingPass.objects.values_list("name", flat=True)) == {"admission", "reconcile"}
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_trigger WHERE tgname = %s", [TRIGGER])
        assert cursor.fetchone() == (1,)


TRIGGER = "clusters_clusterevent_touches_cluster"


@pytest.mark.django_db
def test_the_requests_table_leaves_room_for_the_pass_s_rewrites() -> None:
    """Its pages keep half their room free, so that rewriting a waiting request's queue
    fields (every pass) stays on its page and leaves the table's indexes alone (HOT)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT reloptions FROM pg_class WHERE relname = 'clusters_clusterrequest'")
        (options,) = cursor.fetchone()
    assert "fillfactor=50" in (options or [])
