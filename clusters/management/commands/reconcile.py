"""``manage.py reconcile [--dry-run]``: one reconcile pass over every member of the fleet
now, or what each would do."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser


class Command(BaseCommand):
    help = (
        "Run one reconcile pass over every Kubernetes cluster of the fleet now. With "
        "--dry-run, list what each pass would create, change and delete (and which "
        "requests it would move) without doing any of it: read it before starting the "
        "workers on a restored database."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--dry-run", action="store_true", help="Only list what the passes would do."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["dry_run"]:
            self._rehearse()
            return
        from clusters.engine.reconciler import reconcile_exclusive
        from clusters.models import KubeCluster

        members: list[KubeCluster | None] = [
            *KubeCluster.objects.order_by("placement_order", "name")
        ] or [None]
        for member in members:
            # One member only (or none): the lines read as they did before the fleet.
            where = f" {member.name}" if member is not None and len(members) > 1 else ""
            report = reconcile_exclusive(member=member)
            if report is None:
                self.stdout.write(f"another reconcile pass{where} is running; try again")
                continue
            self.stdout.write(
                f"reconciled{where}: {len(report.ready)} ready, {len(report.recreated)} "
                f"recreated, {len(report.deleted)} deleted, {len(report.orphans)} orphans "
                f"deleted, {len(report.errors)} errors"
            )
            for error in report.errors:
                self.stdout.write(f"error{where}: {error}")

    def _rehearse(self) -> None:
        from clusters.engine.rehearsal import rehearse_fleet

        plans = rehearse_fleet()
        for name, plan in plans.items():
            prefix = f"{name}: " if len(plans) > 1 else ""
            for line in plan.lines():
                self.stdout.write(f"{prefix}{line}")
        totals = [
            sum(len(getattr(p, part)) for p in plans.values())
            for part in ("deletes", "writes", "moves")
        ]
        members = f" over {len(plans)} clusters" if len(plans) > 1 else ""
        self.stdout.write(
            f"dry run{members}: {totals[0]} deletions, {totals[1]} writes, {totals[2]} moves; "
            "nothing was changed"
        )
