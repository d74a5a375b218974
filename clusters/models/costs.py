"""What GPU time costs: prices per flavor over time, money caps per tenant and
engineer, and the monthly reports mailed (docs/cost.md)."""

from __future__ import annotations

from django.conf import settings
from django.core.validators import MinValueValidator
from django.db import models
from django.db.models import Q

from tenants.models import Tenant, TenantOwned


class FlavorPrice(models.Model):
    """The price of one GPU-hour of a flavor from ``effective_from`` on, until the next
    price of that flavor takes over: the price in force at a moment is the one with the
    latest ``effective_from`` at or before it. Keyed by flavor name, as the usage ledger
    is, so that a price outlives a renamed or deleted flavor's history.

    ``borrowed_price_per_gpu_hour`` is for GPU-hours borrowed beyond the tenant's quota;
    empty means the same price (how the borrowed share is found: docs/cost.md).
    """

    flavor_name = models.CharField(max_length=40)
    price_per_gpu_hour = models.DecimalField(
        max_digits=12, decimal_places=4, validators=[MinValueValidator(0)]
    )
    borrowed_price_per_gpu_hour = models.DecimalField(
        max_digits=12, decimal_places=4, null=True, blank=True, validators=[MinValueValidator(0)]
    )
    effective_from = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["flavor_name", "effective_from"]
        constraints = [
            models.UniqueConstraint(
                fields=["flavor_name", "effective_from"], name="one_price_per_moment"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.flavor_name}: {self.price_per_gpu_hour} from {self.effective_from}"


class CostCap(TenantOwned):
    """A monthly budget in money for a tenant as a whole (``username`` empty) or for one
    of its engineers: at ``soft_limit`` the tenant admins (and the engineer) are told once
    per month; at ``hard_limit`` new requests are refused. Either limit may be empty.
    ``notified_month`` is the first day of the last month the soft limit was told."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="cost_caps")
    username = models.CharField(max_length=150, blank=True, default="")
    soft_limit = models.DecimalField(
        max_digits=14, decimal_places=2, null=True, blank=True, validators=[MinValueValidator(0)]
    )
    hard_limit = models.DecimalField(
        max_digits=14, decimal_places=2, null=True, blank=True, validators=[MinValueValidator(0)]
    )
    notified_month = models.DateField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["tenant__slug", "username"]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "username"], name="one_cost_cap_each"),
            models.CheckConstraint(
                condition=Q(soft_limit__isnull=False) | Q(hard_limit__isnull=False),
                name="cost_cap_has_a_limit",
            ),
        ]

    def __str__(self) -> str:
        who = self.username or "tenant"
        return f"{self.tenant}/{who}: soft {self.soft_limit}, hard {self.hard_limit}"


class CostReportMail(TenantOwned):
    """That the monthly cost report of ``month`` (its first day) was mailed to the
    tenant's admins: the beat task mails each month's report once."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="cost_reports")
    month = models.DateField()
    sent_at = models.DateTimeField(auto_now_add=True)
    recipients = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-month"]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "month"], name="one_cost_report_each"),
        ]

    def __str__(self) -> str:
        return f"{self.tenant} {self.month:%Y-%m}"
