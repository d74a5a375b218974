"""``manage.py whatif``: replay a period against a changed world and print both side by side.

    python manage.py whatif --synthetic --days 7 --change nodes:h100=+8
    python manage.py whatif --from 2026-11-01 --to 2026-11-08 --change weight:vision=2

Without ``--synthetic`` it replays the recorded requests of the period (default: the last
seven days) on the world as it is in the database. See docs/whatif.md.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from clusters.whatif import services
from clusters.whatif.workload import LOAD


def _when(text: str) -> datetime:
    try:
        value = datetime.fromisoformat(text)
    except ValueError as error:
        raise CommandError(
            f"Cannot read the time {text!r}: write an ISO date or time, e.g. 2026-11-01 "
            "or 2026-11-01T08:00 (UTC unless it says otherwise)."
        ) from error
    return value if value.tzinfo else value.replace(tzinfo=UTC)


class Command(BaseCommand):
    help = (
        "Replay a recorded period of the request history (or a synthetic week) on the world "
        "as it is and on a changed one, and print waits, allocation, fairness and GPU-hours."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--from", dest="start", help="start of the recorded period (ISO)")
        parser.add_argument(
            "--to", dest="end", help="end of the recorded period (ISO; default now)"
        )
        parser.add_argument(
            "--synthetic",
            action="store_true",
            help="a seeded synthetic workload on kubesim's large fleet instead of the history",
        )
        parser.add_argument("--days", type=float, default=7.0, help="synthetic: days (default 7)")
        parser.add_argument("--seed", type=int, default=19, help="synthetic: seed (default 19)")
        parser.add_argument(
            "--load",
            type=float,
            default=LOAD,
            help="synthetic: GPU-hours asked for in working hours over the fleet's "
            f"(default {LOAD})",
        )
        parser.add_argument(
            "--change",
            action="append",
            default=[],
            help="a change, repeatable: nodes:h100=+8, quota:TENANT/FLAVOR=N, "
            "borrow:TENANT/FLAVOR=N, weight:TENANT=N, idle:TENANT=MINUTES (idle:*=0), "
            "topology:FLAVOR=LEVEL, half-life:HOURS (0: off), notice:SECONDS (notice:off), "
            "requeue:back or requeue:place",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            changes = services.parse_changes(options["change"])
            if options["synthetic"]:
                if options["start"] or options["end"]:
                    raise CommandError("--synthetic replays no recorded period: drop --from/--to.")
                world, workload = services.synthetic(
                    seed=options["seed"], days=options["days"], load=options["load"]
                )
            else:
                end = _when(options["end"]) if options["end"] else timezone.now()
                start = _when(options["start"]) if options["start"] else end - timedelta(days=7)
                world, workload = services.recorded(start=start, end=end)
            comparison = services.whatif_compare(world=world, workload=workload, changes=changes)
        except services.WhatIfError as error:
            raise CommandError(str(error)) from error
        self.stdout.write(services.render_text(comparison))
