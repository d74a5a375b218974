"""``manage.py seed_demo_prices``: GPU-hour prices for make run's demo flavors (idempotent).

Without a price every cost in the demo reads 0.00 (docs/cost.md), so ``make run`` sets
illustrative ones, as the platform admin ``admin`` would on the *Prices* page, effective
from the start of the month so that the month's usage so far is priced. Runs after
``seed_demo``; once any price exists it changes nothing, so an admin's prices survive a
restart.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.utils import timezone

# flavor -> (price, borrowed price) per GPU-hour, in the platform's currency: demo values.
PRICES = {
    "h100": (Decimal("2.50"), Decimal("3.25")),
    "l4": (Decimal("0.50"), Decimal("0.65")),
    "h100-1g": (Decimal("0.40"), Decimal("0.52")),
}
ADMIN = "admin"


class Command(BaseCommand):
    help = "Price the demo flavors' GPU-hours from the start of the month (idempotent)."

    def handle(self, *args: Any, **options: Any) -> None:
        from clusters.models import FlavorPrice
        from clusters.requests.cost_settings import flavor_price_set
        from clusters.rows.usage import month_start
        from tenants.models import GpuFlavor

        if FlavorPrice.objects.exists():
            self.stdout.write("Prices are set: left as they are.")
            return
        actor = get_user_model().objects.get(username=ADMIN)
        present = set(GpuFlavor.objects.filter(name__in=PRICES).values_list("name", flat=True))
        for flavor, (price, borrowed) in PRICES.items():
            if flavor in present:
                flavor_price_set(
                    actor=actor,
                    flavor=flavor,
                    price_per_gpu_hour=price,
                    borrowed_price_per_gpu_hour=borrowed,
                    effective_from=month_start(timezone.now()),
                )
        self.stdout.write(f"Demo prices set for {', '.join(sorted(present))}.")
