"""``manage.py reconcile [--dry-run]``: one reconcile pass now, or what it would do."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser


class Command(BaseCommand):
    help = (
        "Run one reconcile pass against the Kubernetes API now. With --dry-run, list what "
        "the pass would create, change and delete (and which requests it would move) "
        "without doing any of it: read it before starting the workers on a restored "
        "database."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--dry-run", action="store_true", help="Only list what the pass would do."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["dry_run"]:
            from clusters.engine.rehearsal import reconcile_dry_run

            plan = reconcile_dry_run()
            for line in plan.lines():
                self.stdout.write(line)
            self.stdout.write(
                f"dry run: {len(plan.deletes)} deletions, {len(plan.writes)} writes, "
                f"{len(plan.moves)} moves; nothing was changed"
            )
            return
        from clusters.engine.reconciler import reconcile_exclusive

        report = reconcile_exclusive()
        if report is None:
            self.stdout.write("another reconcile pass is running; try again")
            return
        self.stdout.write(
            f"reconciled: {len(report.ready)} ready, {len(report.recreated)} recreated, "
            f"{len(report.deleted)} deleted, {len(report.orphans)} orphans deleted, "
            f"{len(report.errors)} errors"
        )
        for error in report.errors:
            self.stdout.write(f"error: {error}")
