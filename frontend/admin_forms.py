"""The administration pages' forms: they parse and offer choices, nothing more.

Every rule (who may, what is valid, what must stay true) is the services' — the same
ones the API calls — and a service's ``ValidationError`` is put back on these fields
with :func:`attach_errors`.
"""

from __future__ import annotations

import re
from typing import Any

from django import forms
from django.conf import settings
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError

from tenants.models import DeviceMode, GpuFlavor, PodSecurity, Role, Tenant, tenant_namespace
from tenants.slugs import SLUG_HELP, SLUG_MAX_LENGTH, validate_tenant_slug


def attach_errors(form: forms.Form, exc: ValidationError) -> None:
    """Put a service's errors on the form's fields (the rest above the form)."""
    if not hasattr(exc, "error_dict"):
        form.add_error(None, exc)
        return
    for field, errors in exc.message_dict.items():
        # A quota line's error is keyed "flavors.<i>.<field>"; shown above the form. A
        # model constraint's (a cohort its own parent) names no field and needs no prefix.
        target = field if field in form.fields else None
        for error in errors:
            shown = error if target or field == NON_FIELD_ERRORS else f"{field}: {error}"
            form.add_error(target, shown)


class ReasonForm(forms.Form):
    """Why: what the owner of a request reads in its timeline."""

    reason = forms.CharField(
        max_length=300,
        required=False,
        widget=forms.TextInput(attrs={"placeholder": "The owner reads this in the timeline"}),
    )


class PriorityForm(ReasonForm):
    """A request's new priority and why."""

    field_order = ["priority", "reason"]

    priority = forms.IntegerField(
        min_value=settings.CLUSTER_PRIORITY_MIN,
        max_value=settings.CLUSTER_PRIORITY_MAX,
        help_text=(
            f"{settings.CLUSTER_PRIORITY_MIN} to {settings.CLUSTER_PRIORITY_MAX}; higher goes "
            "first among the tenant's requests of the same kind."
        ),
    )


class UserCreateForm(forms.Form):
    """A new local account."""

    username = forms.CharField(max_length=150)
    email = forms.EmailField(required=False)
    password = forms.CharField(widget=forms.PasswordInput(render_value=False), strip=False)
    is_staff = forms.BooleanField(required=False, label="Platform admin")


# How the acronyms in field names are written: Django's generated labels would say
# "Max dev gpus per user" and "Dev ttl hours".
ACRONYMS = {
    word.lower(): word for word in ("GPU", "GPUs", "CPU", "CPUs", "TTL", "GiB", "ID", "URL", "API")
}


def spelled_out(label: str) -> str:
    """``label`` with its acronyms in their own case ("Dev ttl hours" -> "Dev TTL hours")."""
    return re.sub(r"[A-Za-z]+", lambda m: ACRONYMS.get(m.group().lower(), m.group()), label)


class SpelledOutLabels(forms.ModelForm):
    """A model form whose labels, generated from field names, write acronyms as such."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for field in self.fields.values():
            if field.label:
                field.label = spelled_out(str(field.label))


class TopologyField(forms.CharField):
    """A flavor's topology levels typed one node label key per line (or comma-separated)."""

    widget = forms.Textarea(attrs={"rows": 2})

    def prepare_value(self, value: Any) -> Any:
        return "\n".join(value) if isinstance(value, list) else value

    def to_python(self, value: Any) -> list[str]:  # type: ignore[override]
        text = super().to_python(value) or ""
        return [k.strip() for k in re.split(r"[,\n]", text) if k.strip()]


class FlavorForm(SpelledOutLabels):
    """A GPU node type of the catalogue (the name is fixed once created)."""

    topology = TopologyField(
        required=False,
        label="Topology levels",
        help_text="Node label keys of its network levels, coarse to fine, one per line, e.g. "
        "network.topology.kubernetes.io/block then network.topology.kubernetes.io/rack. "
        "Production requests may then ask that all their workers share one.",
    )

    class Meta:
        model = GpuFlavor
        fields = [
            "name",
            "gpu_product",
            "gpus_per_node",
            "cpu_per_node",
            "memory_per_node_gib",
            "node_count",
            "max_node_count",
            "sharing",
            "device_mode",
            "device_class",
            "device_selector",
            "mig_profile",
            "topology",
        ]
        widgets = {"device_selector": forms.Textarea(attrs={"rows": 2})}
        # What the queue modes cannot do with a DRA flavor (docs/flavors.md).
        help_texts = {
            "device_mode": "Under Kueue, one DRA flavor per device class and GPU product: "
            "Kueue counts devices per class (kubernetes-sigs/kueue#10108). KAI's fractional "
            "sharing is for extended-resource flavors only.",
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.fields["name"].disabled = True
        # Left out (as by scripts posting the older form): the extended resource, as before.
        self.fields["device_mode"].required = False
        self.fields["mig_profile"].label = "MIG profile"

    def clean_device_mode(self) -> str:
        return str(self.cleaned_data.get("device_mode") or DeviceMode.EXTENDED)

    def validate_unique(self) -> None:
        """The service checks uniqueness, in its transaction."""


class TenantCreateForm(forms.Form):
    """A new tenant: its namespace is derived from the slug, as the API derives it."""

    # The slug rule alone, its message the help beside the field; the browser stops at
    # the rule's length (maxlength), a request that does not gets the same message.
    slug = forms.CharField(
        validators=[validate_tenant_slug],
        help_text=f"{SLUG_HELP} The namespace will be {tenant_namespace('<slug>')}.",
        widget=forms.TextInput(attrs={"maxlength": SLUG_MAX_LENGTH}),
    )
    name = forms.CharField(max_length=100)
    cohort = forms.SlugField(
        max_length=40,
        initial="default",
        help_text="Tenants of one cohort borrow each other's unused quota.",
    )
    weight = forms.DecimalField(
        min_value=0.01, max_value=1000, decimal_places=2, initial=1, help_text="Fair-share weight."
    )


class CohortForm(forms.Form):
    """A cohort's place in the cohort tree: its parent (empty: a root) and a description.
    The service checks the names and refuses a parent that would close a loop."""

    name = forms.CharField(
        max_length=40, help_text="A cohort tenants name, or a new one (lowercase, dashes)."
    )
    parent = forms.CharField(
        max_length=40,
        required=False,
        help_text="The cohort it lends to and borrows from. Empty: it is a root.",
        # The known cohorts are offered (the page's datalist); a new name is fine too.
        widget=forms.TextInput(attrs={"list": "cohort-names", "autocomplete": "off"}),
    )
    description = forms.CharField(max_length=200, required=False)


class TenantEditForm(SpelledOutLabels):
    """What a platform admin changes on a tenant (never the slug or namespace)."""

    class Meta:
        model = Tenant
        fields = [
            "name",
            "cohort",
            "weight",
            "pod_security",
            "max_ttl_hours",
            "dev_ttl_hours",
            "max_dev_clusters_per_user",
            "max_dev_gpus_per_user",
            "idle_suspend_minutes",
            "idle_suspend_prod",
            "idle_gpu_util_percent",
            "monthly_gpu_hour_budget",
            "allow_pip_direct_urls",
        ]
        widgets = {"pod_security": forms.Select(choices=PodSecurity.choices)}

    def validate_unique(self) -> None:
        """The service checks, in its transaction."""


class PolicyForm(SpelledOutLabels):
    """What a tenant's own admins change: how their engineers share the tenant."""

    class Meta:
        model = Tenant
        fields = [
            "max_dev_clusters_per_user",
            "max_dev_gpus_per_user",
            "dev_ttl_hours",
            "idle_suspend_minutes",
            "idle_suspend_prod",
            "idle_gpu_util_percent",
            "allow_pip_direct_urls",
        ]

    def validate_unique(self) -> None:
        """The service checks, in its transaction."""


class QuotaForm(forms.Form):
    """A tenant's whole quota: per flavor nominal, borrowing and lending limits, plus the
    tenant's CPU and memory. Fields are made per catalogue flavor."""

    cpu = forms.IntegerField(min_value=0, max_value=10_000_000, label="CPU cores (0: no quota)")
    memory_gib = forms.IntegerField(
        min_value=0, max_value=100_000_000, label="Memory GiB (0: no quota)"
    )

    def __init__(self, *args: Any, flavors: list[GpuFlavor], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.flavors = flavors
        for f in flavors:
            self.fields[f"{f.name}-gpus"] = forms.IntegerField(
                min_value=0, max_value=1_000_000, required=False, label=f"{f.name} nominal GPUs"
            )
            self.fields[f"{f.name}-borrow"] = forms.IntegerField(
                min_value=0, max_value=1_000_000, required=False, label=f"{f.name} may borrow"
            )
            self.fields[f"{f.name}-lend"] = forms.IntegerField(
                min_value=0,
                max_value=1_000_000,
                required=False,
                label=f"{f.name} lends at most",
                help_text="Empty: all of its unused nominal quota.",
            )

    def rows(self) -> list[dict[str, Any]]:
        """The per-flavor fields, one row per flavor, for the template's table."""
        return [
            {
                "flavor": f,
                "gpus": self[f"{f.name}-gpus"],
                "borrow": self[f"{f.name}-borrow"],
                "lend": self[f"{f.name}-lend"],
            }
            for f in self.flavors
        ]

    def lines(self) -> list[dict[str, Any]]:
        """The flavors with a quota (nominal or borrowing above 0), as the service takes
        them; call after ``is_valid()``."""
        out = []
        for f in self.flavors:
            gpus = self.cleaned_data.get(f"{f.name}-gpus") or 0
            borrow = self.cleaned_data.get(f"{f.name}-borrow") or 0
            lend = self.cleaned_data.get(f"{f.name}-lend")
            if gpus or borrow:
                out.append(
                    {"flavor": f.name, "gpus": gpus, "borrow_limit": borrow, "lend_limit": lend}
                )
        return out


class MemberAddForm(forms.Form):
    """Give an existing user a role in the tenant."""

    username = forms.CharField(max_length=150)
    role = forms.ChoiceField(choices=Role.choices, initial=Role.ENGINEER)


class MemberRoleForm(forms.Form):
    """A member's new role."""

    role = forms.ChoiceField(choices=Role.choices)
