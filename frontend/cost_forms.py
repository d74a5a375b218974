"""Forms of showback (docs/cost.md): a flavor's price, a money cap. They only read the
fields; the services (``clusters.requests.cost_settings``) validate and write."""

from __future__ import annotations

from typing import Any

from django import forms

from tenants.models import GpuFlavor


class PriceForm(forms.Form):
    """A flavor's price per GPU-hour from a moment on (platform admins)."""

    flavor = forms.ChoiceField()
    price_per_gpu_hour = forms.DecimalField(
        label="Price per GPU-hour", min_value=0, max_digits=12, decimal_places=4
    )
    borrowed_price_per_gpu_hour = forms.DecimalField(
        label="Borrowed price per GPU-hour",
        required=False,
        min_value=0,
        max_digits=12,
        decimal_places=4,
        help_text="Optional: for GPU-hours borrowed beyond the tenant's quota.",
    )
    effective_from = forms.DateTimeField(
        required=False,
        label="Effective from (UTC)",
        help_text="Empty: now. YYYY-MM-DD HH:MM, in UTC.",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        names = GpuFlavor.objects.order_by("name").values_list("name", flat=True)
        field = self.fields["flavor"]
        assert isinstance(field, forms.ChoiceField)
        field.choices = [(n, n) for n in names]


class CostCapForm(forms.Form):
    """A monthly cost cap of the tenant or one of its engineers (tenant admins)."""

    username = forms.CharField(
        required=False,
        max_length=150,
        label="Engineer",
        help_text="Empty: the tenant as a whole.",
    )
    soft_limit = forms.DecimalField(
        required=False,
        min_value=0,
        max_digits=14,
        decimal_places=2,
        help_text="Tell the admins (and the engineer) once a month when reached.",
    )
    hard_limit = forms.DecimalField(
        required=False,
        min_value=0,
        max_digits=14,
        decimal_places=2,
        help_text="Refuse new requests when reached. Both empty: remove the cap.",
    )
