"""The dashboard's create form: the API's create body as a Django form.

It only parses and offers choices; every rule (shape limits, policy, caps, who may ask
for production) is checked by :mod:`clusters.requests.services`, whose ``ValidationError`` the
views attach back to these fields with :meth:`ClusterForm.add_service_errors`.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError

from clusters import shapes
from clusters.models import ClusterKind
from clusters.spec import ClusterSpec
from tenants.models import Role, Tenant
from tenants.selectors import flavor_list, unknown_flavor_message

FRACTION_NOTE = (
    "Fractional GPUs share one device under the KAI scheduler and are not memory-isolated: "
    "a neighbour can run yours out of GPU memory. For development only."
)


# Labels of the request's fields, for errors about fields the form does not show
# (a service's rule may name any field of the request).
FIELD_LABELS = {
    "name": "Name",
    "kind": "Kind",
    "flavor": "Flavor",
    "workers": "Workers",
    "min_workers": "Min workers",
    "max_workers": "Max workers",
    "gpu_fraction": "GPU fraction",
    "ttl_hours": "Time to live",
    "image": "Image",
    "worker_groups": "Worker groups",
    "hours": "Hours",
}


class FlavorChoiceField(forms.ModelChoiceField):
    """The flavor select; an unknown name is refused naming the flavors there are."""

    def to_python(self, value: Any) -> Any:
        try:
            return super().to_python(value)
        except ValidationError as exc:
            raise ValidationError(
                unknown_flavor_message(str(value)), code="invalid_choice"
            ) from exc


class ExtendForm(forms.Form):
    """The extend buttons' ``hours``: the bounds of :func:`shapes.validate_extend_hours`,
    which the service checks again."""

    hours = forms.IntegerField(
        min_value=shapes.MIN_HOURS,
        max_value=shapes.MAX_HOURS,
        error_messages={
            "required": shapes.EXTEND_HOURS_MESSAGE,
            "invalid": shapes.EXTEND_HOURS_MESSAGE,
            "min_value": shapes.EXTEND_HOURS_MESSAGE,
            "max_value": shapes.EXTEND_HOURS_MESSAGE,
        },
    )

    def clean_hours(self) -> int:
        return shapes.validate_extend_hours(self.cleaned_data["hours"])


class ClusterForm(forms.Form):
    """``name?, kind, flavor, workers, min_workers, max_workers, gpu_fraction, ttl_hours``."""

    name = forms.CharField(
        required=False,
        max_length=53,
        help_text="Optional; lower-case letters, digits and dashes. Generated when empty.",
    )
    kind = forms.ChoiceField(choices=ClusterKind.choices, initial=ClusterKind.DEV)
    flavor = FlavorChoiceField(queryset=flavor_list(), to_field_name="name", empty_label=None)
    workers = forms.IntegerField(min_value=0, max_value=1024, initial=1)
    min_workers = forms.IntegerField(
        required=False,
        min_value=0,
        max_value=1024,
        label=FIELD_LABELS["min_workers"],
        help_text="Production autoscaling only.",
    )
    max_workers = forms.IntegerField(
        required=False,
        min_value=0,
        max_value=1024,
        label=FIELD_LABELS["max_workers"],
        help_text="Production autoscaling only. The quota is charged for max workers, "
        "so the cluster can always grow to it.",
    )
    gpu_fraction = forms.DecimalField(
        required=False,
        min_value=0,
        max_value=1,
        max_digits=4,
        decimal_places=3,
        label="GPU fraction",
        help_text=FRACTION_NOTE,
    )
    ttl_hours = forms.IntegerField(
        required=False,
        min_value=shapes.MIN_HOURS,
        max_value=shapes.MAX_HOURS,
        label=FIELD_LABELS["ttl_hours"],
    )

    def __init__(
        self, *args: Any, tenant: Tenant, role: str | None, kai_enabled: bool, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.tenant = tenant
        self.is_admin = role == Role.ADMIN
        if not self.is_admin:
            # Offer only what the role may ask for; the service refuses prod anyway.
            self.fields["kind"].choices = [(ClusterKind.DEV, ClusterKind.DEV.label)]  # type: ignore[attr-defined]
            del self.fields["min_workers"]
            del self.fields["max_workers"]
        sharing = [f.name for f in self.fields["flavor"].queryset if f.sharing]  # type: ignore[attr-defined]
        if kai_enabled and sharing:
            self.fields[
                "gpu_fraction"
            ].help_text = f"Dev clusters on {', '.join(sharing)} only. {FRACTION_NOTE}"
        else:
            del self.fields["gpu_fraction"]
        self.fields[
            "ttl_hours"
        ].help_text = (
            f"Hours; dev default {tenant.dev_ttl_hours} h, at most {tenant.max_ttl_hours} h."
        )

    def spec(self) -> ClusterSpec:
        """The cleaned form as the request the services take."""
        return ClusterSpec.from_data(self.cleaned_data)

    def add_service_errors(self, exc: ValidationError) -> None:
        """Attach a service's ``ValidationError`` to the fields it names (others: form-wide)."""
        errors: dict[str, list[str]] = (
            exc.message_dict if hasattr(exc, "error_dict") else {"__all__": exc.messages}
        )
        for field, messages in errors.items():
            target = field if field in self.fields else None
            for message in messages:
                label = FIELD_LABELS.get(field, field.replace("_", " ").capitalize())
                prefix = "" if target or field in ("__all__", NON_FIELD_ERRORS) else f"{label}: "
                self.add_error(target, f"{prefix}{message}")

    def labelled_errors(self) -> list[tuple[str, str]]:
        """Every error as ``(label, message)``, the label empty for form-wide ones: what
        a person reads, never a field's code name."""
        out: list[tuple[str, str]] = []
        for field, messages in self.errors.items():
            label = "" if field == NON_FIELD_ERRORS else str(self[field].label)
            out.extend((label, str(message)) for message in messages)
        return out
