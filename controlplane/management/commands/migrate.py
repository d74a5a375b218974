"""Django's ``migrate``, which first refuses a database caught half-way through the
migrations a squash replaced (docs/operations.md, "Upgrading"): Django itself would fail
deep in building the schema's state, with no word of what to do."""

from __future__ import annotations

from typing import Any

from django.core.management import CommandError
from django.core.management.commands import migrate
from django.db import connections
from django.db.migrations.loader import MigrationLoader


def half_applied_squashes(database: str) -> list[str]:
    """One line per squashed migration of which the database has some replaced steps
    but not all (and not the squash itself)."""
    loader = MigrationLoader(connections[database], ignore_no_migrations=True)
    applied = set(loader.applied_migrations)
    found = []
    for key, migration in sorted(loader.disk_migrations.items()):
        replaced = list(migration.replaces or ())
        done = [r for r in replaced if r in applied]
        if key in applied or not done or len(done) == len(replaced):
            continue
        missing = [name for app, name in replaced if (app, name) not in applied]
        found.append(
            f"{key[0]} {key[1]}: this database has {len(done)} of the {len(replaced)} "
            f"migrations it replaces; it lacks {', '.join(missing)}"
        )
    return found


class Command(migrate.Command):
    """``migrate``, with the squash check first."""

    def handle(self, *args: Any, **options: Any) -> None:
        half = half_applied_squashes(options["database"])
        if half:
            raise CommandError(
                "This database stopped between migrations that are now squashed:\n  "
                + "\n  ".join(half)
                + "\nUpgrade first to a gangway from before the squash (any version that "
                "still has those migrations), run migrate there, then come back to this "
                "one. docs/operations.md, 'Upgrading', says more."
            )
        super().handle(*args, **options)
