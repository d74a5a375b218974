"""The form that registers a Kubernetes cluster in the fleet: it parses, the service
(:func:`clusters.members.services.kube_cluster_register`) checks and saves."""

from __future__ import annotations

from typing import Any, cast

from django import forms
from django.core.exceptions import ValidationError

from clusters.members.selectors import kube_cluster_list
from tenants.models import Tenant
from tenants.selectors import flavor_list


class KubeClusterForm(forms.Form):
    """Where the cluster's API server is, how gangway signs in, where it places."""

    name = forms.RegexField(
        regex=r"^[a-z]([-a-z0-9]{0,38}[a-z0-9])?$",
        max_length=40,
        help_text="Lowercase letters, digits and hyphens; fixed once registered.",
    )
    server = forms.URLField(
        label="API server URL",
        max_length=500,
        assume_scheme="https",
        widget=forms.URLInput(attrs={"placeholder": "https://k8s.example.com:6443"}),
    )
    token = forms.CharField(
        label="Service account token",
        required=False,
        strip=True,
        widget=forms.PasswordInput(attrs={"autocomplete": "off"}),
        help_text="Stored encrypted, never shown again. Or give a client certificate and key.",
    )
    ca_data = forms.CharField(
        label="CA bundle (PEM)",
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="The API server's certificate authority; empty: the system's.",
    )
    client_certificate = forms.CharField(
        label="Client certificate (PEM)", required=False, widget=forms.Textarea(attrs={"rows": 3})
    )
    client_key = forms.CharField(
        label="Client key (PEM)",
        required=False,
        widget=forms.Textarea(attrs={"rows": 3, "autocomplete": "off"}),
    )
    insecure_skip_tls_verify = forms.BooleanField(
        label="Skip TLS verification (development only)", required=False
    )
    region = forms.CharField(max_length=63, required=False)
    labels = forms.CharField(
        required=False,
        help_text="key=value pairs separated by commas, e.g. site=lab, tier=onprem",
    )
    placement_order = forms.IntegerField(
        min_value=0,
        max_value=100_000,
        initial=100,
        help_text="Admission tries clusters from the lowest order up.",
    )
    allowed_tenants = forms.ModelMultipleChoiceField(
        queryset=Tenant.objects.unscoped().filter(archived_at__isnull=True).order_by("slug"),
        required=False,
        to_field_name="slug",
        help_text="None chosen: every tenant may use it.",
    )

    def clean_labels(self) -> dict[str, str]:
        labels: dict[str, str] = {}
        for item in filter(None, (p.strip() for p in self.cleaned_data["labels"].split(","))):
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise ValidationError(f"{item!r} is not key=value.")
            labels[key.strip()] = value.strip()
        return labels

    def registration(self) -> dict[str, Any]:
        """The service's keyword arguments from the cleaned form."""
        return dict(self.cleaned_data)


class QuotaCapForm(forms.Form):
    """A cap on a tenant's quota in one member: the service
    (:func:`clusters.members.quota_caps.quota_cap_set`) checks the names and saves."""

    kube_cluster = forms.ChoiceField(label="Kubernetes cluster")
    flavor = forms.ChoiceField(label="GPU flavor")
    gpus = forms.IntegerField(
        label="At most GPUs there",
        min_value=0,
        max_value=1_000_000,
        required=False,
        help_text="Empty: no cap (the whole quota may be held there).",
    )

    def __init__(self, *args: Any, members: list[str], flavors: list[str], **kw: Any) -> None:
        super().__init__(*args, **kw)
        cast(forms.ChoiceField, self.fields["kube_cluster"]).choices = [(m, m) for m in members]
        cast(forms.ChoiceField, self.fields["flavor"]).choices = [(f, f) for f in flavors]


def quota_cap_form(data: Any = None) -> QuotaCapForm:
    """The cap form, choosing among the fleet's members and the catalogue's flavors."""
    return QuotaCapForm(
        data,
        members=list(kube_cluster_list().values_list("name", flat=True)),
        flavors=list(flavor_list().values_list("name", flat=True)),
    )


class StockForm(forms.Form):
    """A flavor's nodes in one member: the service
    (:func:`clusters.members.stock.stock_set`) saves them with the flavor's new sums."""

    flavor = forms.ChoiceField(label="Flavor")
    node_count = forms.IntegerField(
        label="Nodes",
        min_value=0,
        max_value=100_000,
        required=False,
        help_text="Empty: it has none of this flavor.",
    )
    max_node_count = forms.IntegerField(
        label="Grows to at most",
        min_value=0,
        max_value=100_000,
        required=False,
        help_text="Its autoscaler's maximum; empty: it cannot grow.",
    )

    def __init__(self, *args: Any, flavors: list[str], **kw: Any) -> None:
        super().__init__(*args, **kw)
        cast(forms.ChoiceField, self.fields["flavor"]).choices = [(f, f) for f in flavors]


def stock_form(data: Any = None) -> StockForm:
    """The stock form, choosing among the catalogue's flavors."""
    return StockForm(data, flavors=list(flavor_list().values_list("name", flat=True)))
