"""``manage.py seed_demo``: load the demo data (idempotent) and print the logins."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from tenants.demo import DEMO_PASSWORD, demo_seed


class Command(BaseCommand):
    help = "Create demo tenants, users, flavors and quotas (idempotent) and print the logins."

    def handle(self, *args: Any, **options: Any) -> None:
        result = demo_seed()
        self.stdout.write(
            f"Demo data ready ({result.created} rows created). "
            f"Every demo user's password is {DEMO_PASSWORD!r}:"
        )
        self.stdout.write(f"  {'username':<10} {'tenant':<8} role")
        for login in result.logins:
            self.stdout.write(f"  {login.username:<10} {login.tenant:<8} {login.role}")
