"""``manage.py demo_webhook URL``: point each demo tenant's demo webhook at ``URL``.

``make run`` runs it with the address of its own webhook receiver
(:mod:`notifications.webhook_sink`), so a demo tenant's events are seen arriving there
from the first minute. Idempotent: the webhook named :data:`DEMO_NAME` is created once
per tenant and its URL moved when make run's ports change; nothing else is touched.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from notifications.services import demo_webhook_point
from tenants.demo import TENANTS


class Command(BaseCommand):
    help = "Point the demo tenants' demo webhook at URL (make run's webhook receiver)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("url")

    def handle(self, *args: Any, **options: Any) -> None:
        for slug in demo_webhook_point(url=options["url"], slugs=list(TENANTS)):
            self.stdout.write(f"  webhook of {slug} -> {options['url']}")
