"""``make run``'s demo prices (``manage.py seed_demo_prices``): set once after
``seed_demo``, as the platform admin, from the start of the month; left alone after."""

from __future__ import annotations

from decimal import Decimal
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone

from clusters.management.commands.seed_demo_prices import PRICES
from clusters.models import FlavorPrice
from clusters.rows.usage import month_start
from tenants.models import AuditEvent

pytestmark = pytest.mark.django_db


def test_the_demo_flavors_are_priced_once_from_the_start_of_the_month() -> None:
    call_command("seed_demo", stdout=StringIO())
    out = StringIO()
    call_command("seed_demo_prices", stdout=out)
    assert "Demo prices set for h100, h100-1g, l4." in out.getvalue()
    rows = {p.flavor_name: p for p in FlavorPrice.objects.all()}
    assert set(rows) == set(PRICES)
    for name, (price, borrowed) in PRICES.items():
        assert (rows[name].price_per_gpu_hour, rows[name].borrowed_price_per_gpu_hour) == (
            price,
            borrowed,
        )
        assert rows[name].effective_from == month_start(timezone.now())
        assert rows[name].created_by is not None and rows[name].created_by.username == "admin"
    assert AuditEvent.objects.filter(action="price.set", actor_name="admin").count() == 3


def test_prices_that_exist_are_left_as_they_are() -> None:
    call_command("seed_demo", stdout=StringIO())
    call_command("seed_demo_prices", stdout=StringIO())
    FlavorPrice.objects.filter(flavor_name="l4").update(price_per_gpu_hour=Decimal("9"))
    again = StringIO()
    call_command("seed_demo_prices", stdout=again)
    assert "Prices are set: left as they are." in again.getvalue()
    assert FlavorPrice.objects.count() == 3
    assert FlavorPrice.objects.get(flavor_name="l4").price_per_gpu_hour == Decimal("9")
