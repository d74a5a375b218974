"""The dashboard's forms: the parts every kind's create form shares (a Ray cluster's
shape, :class:`ClusterForm`, which a service's form extends; flavor, image and env inputs;
errors by label), and the notification forms. A kind's own form sits in its
``frontend/kinds/`` module.

They only parse and offer choices; every rule (shape limits, policy, caps, who may ask
for production) is checked by :mod:`clusters.requests.services`, whose ``ValidationError`` the
views attach back to these fields with :meth:`LabelledErrorsForm.add_service_errors`.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError

from clusters.domain import shapes
from clusters.domain.environment import validate_env
from clusters.domain.images import allowed_images
from clusters.models import ClusterKind
from clusters.rows.spec import ClusterSpec
from notifications.event_kinds import EventKind
from notifications.services import PreferenceLine
from tenants.models import Role, Tenant
from tenants.selectors import (
    default_flavor_name,
    flavor_list,
    priority_classes_for,
    unknown_flavor_message,
)

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
    "env": "Environment variables",
    "container_gpus": "Containers see the pod's GPUs",
    "worker_groups": "Worker groups",
    "hours": "Hours",
    "topology_level": "Keep workers together",
    "topology_mode": "How strictly",
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


def image_field() -> forms.ChoiceField:
    """The image select: the allow-list, each with its Ray version, the default first
    chosen. The services refuse any other image."""
    choices = []
    for image in allowed_images():
        version = f"Ray {image.ray_version}" if image.ray_version else "Ray version not in tag"
        note = f"{version}, default" if image.default else version
        choices.append((image.image, f"{image.image} ({note})"))
    return forms.ChoiceField(
        required=False,  # left out: the default image
        choices=choices,
        initial=settings.RAY_IMAGE_DEFAULT,
        label=FIELD_LABELS["image"],
        error_messages={
            "invalid_choice": "Image %(value)s is not allowed: choose one of the allow-list."
        },
        help_text="The Ray image of the head and every worker (the platform's allow-list).",
    )


def container_gpus_field() -> forms.BooleanField:
    return forms.BooleanField(
        required=False,
        label=FIELD_LABELS["container_gpus"],
        help_text="For runtime environments that run containers (image_uri): each GPU "
        "worker writes a CDI spec of its own GPUs, so a container sees those and no "
        "others. Whole GPUs only; the tenant's Pod Security level must be baseline.",
    )


class TopologyLevelSelect(forms.Select):
    """The level select: each option names, in ``data-flavors``, the flavors whose
    topology has that level, so that gangway.js offers only the chosen flavor's."""

    def __init__(self, flavors_of: dict[str, list[str]]) -> None:
        super().__init__(attrs={"data-topology-levels": "true"})
        self.flavors_of = flavors_of

    def create_option(self, name: str, value: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        option = super().create_option(name, value, *args, **kwargs)
        if value:
            option["attrs"]["data-flavors"] = " ".join(self.flavors_of.get(str(value), []))
        return option


def level_label(key: str) -> str:
    """A level as a person reads it: ``One rack (network.topology.kubernetes.io/rack)``."""
    short = key.rsplit("/", 1)[-1].replace("gpu.", "").replace("-", " ").replace("_", " ")
    return f"One {short} ({key})"


def add_topology_fields(form: LabelledErrorsForm) -> None:
    """A production request's "Keep workers together" inputs (docs/topology.md): the
    level, among the levels of the flavors' topologies, and required or preferred.

    Added only when the form offers production and some flavor has a topology; shown
    (gangway.js) only while the kind is prod and the chosen flavor has levels. The
    service (:func:`clusters.requests.placement_wish.topology_errors`) judges the pair."""
    if "prod" not in dict(form.fields["kind"].choices):  # type: ignore[attr-defined]
        return
    flavors_of: dict[str, list[str]] = {}
    for flavor in form.fields["flavor"].queryset:  # type: ignore[attr-defined]
        for key in flavor.topology or []:
            flavors_of.setdefault(key, []).append(flavor.name)
    if not flavors_of:
        return
    form.fields["topology_level"] = forms.ChoiceField(
        required=False,
        choices=[("", "No: wherever they fit"), *((k, level_label(k)) for k in flavors_of)],
        widget=TopologyLevelSelect(flavors_of),
        label=FIELD_LABELS["topology_level"],
        error_messages={
            "invalid_choice": "%(value)s is no level of any flavor's topology.",
        },
        help_text="Production only: every worker in one domain of this level of the "
        "flavor's network (faster between nodes, may wait longer for room).",
    )
    form.fields["topology_mode"] = forms.ChoiceField(
        required=False,
        choices=[("required", "Required"), ("preferred", "Preferred")],
        initial="required",
        widget=forms.RadioSelect,
        label=FIELD_LABELS["topology_mode"],
        help_text="Required: it waits until one domain has room for all its workers. "
        "Preferred: as few domains as the scheduler can manage.",
    )
    # Beside the shape they are about, not after the payload's inputs.
    after = "max_workers" if "max_workers" in form.fields else "workers"
    names = [n for n in form.fields if n not in ("topology_level", "topology_mode")]
    at = names.index(after) + 1
    form.order_fields([*names[:at], "topology_level", "topology_mode", *names[at:]])
    form.shown_when = {
        **form.shown_when,
        "topology_level": ("kind", "prod"),
        "topology_mode": ("kind", "prod"),
    }


def topology_wish(data: dict[str, Any]) -> dict[str, str]:
    """The level and mode as the services take them: a mode only with a level (the
    radio always sends one), ``required`` when none was picked (as the API defaults)."""
    level = data.get("topology_level") or ""
    if not level:
        return {"topology_level": "", "topology_mode": ""}
    return {"topology_level": level, "topology_mode": data.get("topology_mode") or "required"}


def parse_env_lines(text: str) -> dict[str, str]:
    """``KEY=VALUE`` lines (blank lines skipped, the value may hold ``=``) as a dict,
    or a ``ValidationError`` with one message per faulty line, in the words of
    :func:`clusters.domain.environment.validate_env` (the one set of rules) with its line."""
    variables: dict[str, str] = {}
    lines: dict[str, int] = {}
    faults: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        key, sep, value = line.partition("=")
        key = key.strip()
        if not sep or not key:
            faults.append(f"Line {number}: write KEY=VALUE.")
            continue
        if key in lines:
            faults.append(f"Line {number}: {key} is already set on line {lines[key]}.")
            continue
        _, line_faults = validate_env({key: value})
        faults.extend(f"Line {number}: {fault}" for fault in line_faults)
        lines[key] = number
        variables[key] = value
    if not faults:
        # What only the whole can break: how many there are, and their total size.
        _, faults = validate_env(variables)
    if faults:
        raise ValidationError(faults)
    return variables


class LabelledErrorsForm(forms.Form):
    """A form whose errors the verdict panel lists by label."""

    # Inputs the new-request page marks: shape inputs (hidden while a job runs on a dev
    # cluster) and those whose help is a warning.
    shape_fields: tuple[str, ...] = ()
    # Inputs shown only while another input has a value: {field: (other field, value)}
    # (gangway.js hides them otherwise; the server judges them either way).
    shown_when: dict[str, tuple[str, str]] = {}
    warning_fields: tuple[str, ...] = ()
    # The words of a service's error keys: the input each goes to (when not its own name)
    # and the label that names a field the form does not show.
    error_inputs: dict[str, str] = {}
    error_labels: dict[str, str] = FIELD_LABELS

    def labelled_errors(self) -> list[tuple[str, str]]:
        """Every error as ``(label, message)``, the label empty for form-wide ones: what
        a person reads, never a field's code name."""
        out: list[tuple[str, str]] = []
        for field, messages in self.errors.items():
            label = "" if field == NON_FIELD_ERRORS else str(self[field].label)
            out.extend((label, str(message)) for message in messages)
        return out

    def add_service_errors(self, exc: ValidationError) -> None:
        """Attach a service's ``ValidationError`` to the inputs it names (others:
        form-wide, prefixed with the field's label)."""
        errors: dict[str, list[str]] = (
            exc.message_dict if hasattr(exc, "error_dict") else {"__all__": exc.messages}
        )
        for key, messages in errors.items():
            field = self.error_inputs.get(key, key)
            target = field if field in self.fields else None
            label = self.error_labels.get(key, key.replace("_", " ").capitalize())
            prefix = "" if target or key in ("__all__", NON_FIELD_ERRORS) else f"{label}: "
            for message in messages:
                self.add_error(target, f"{prefix}{message}")


def start_on_default_flavor(form: forms.Form, tenant: Tenant) -> None:
    """Open the form on a flavor the tenant has quota on (:func:`default_flavor_name`),
    not on whichever the catalogue lists first."""
    name = default_flavor_name(tenant)
    if name is not None:
        form.fields["flavor"].initial = name


class PriorityClassChoiceField(forms.ModelChoiceField):
    """A priority class by name, each option saying its value and description."""

    def label_from_instance(self, obj: Any) -> str:
        words = f"{obj.name} ({obj.value}{', may preempt' if obj.may_preempt else ''})"
        return f"{words}: {obj.description}" if obj.description else words


def add_priority_class_field(form: forms.Form, *, tenant: Tenant, role: str | None) -> None:
    """The "Priority class" select: the classes the tenant may pick (those that may
    preempt for its admins only, as the service rules), the default preselected. No
    class on the platform: no select (the request then has none)."""
    classes = list(priority_classes_for(tenant))
    if role != Role.ADMIN:
        classes = [pc for pc in classes if pc.is_default or not pc.may_preempt]
    if not classes:
        return
    default = next((pc for pc in classes if pc.is_default), None)
    form.fields["priority_class"] = PriorityClassChoiceField(
        queryset=priority_classes_for(tenant).filter(pk__in=[pc.pk for pc in classes]),
        to_field_name="name",
        required=False,
        empty_label=None if default else "None (value 0)",
        initial=default.name if default else None,
        label="Priority class",
        help_text="Higher classes go first; a class that may preempt takes lower classes' "
        "GPUs after notice (docs/preemption.md).",
    )


def ttl_hours_field(tenant: Tenant) -> forms.IntegerField:
    """The TTL input: its HTML bounds and its error are the services' rule
    (:func:`clusters.domain.shapes.ttl_hours_range`), so the browser refuses what the verdict
    panel and the API refuse, and says so in the same words."""
    low, high = shapes.ttl_hours_range(tenant)
    message = shapes.ttl_hours_message(tenant)
    return forms.IntegerField(
        required=False,
        min_value=low,
        max_value=high,
        label=FIELD_LABELS["ttl_hours"],
        help_text=f"Hours; dev default {tenant.dev_ttl_hours} h, at most {high} h.",
        error_messages={"invalid": message, "min_value": message, "max_value": message},
    )


class ClusterForm(LabelledErrorsForm):
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
    # Its bounds are the tenant's: replaced in __init__, here for the fields' order.
    ttl_hours = forms.IntegerField(required=False, label=FIELD_LABELS["ttl_hours"])
    env = forms.CharField(
        required=False,
        label=FIELD_LABELS["env"],
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="KEY=VALUE, one per line, set in the head and every worker. Names that "
        "decide which GPUs a process sees or that Ray, KubeRay or Kubernetes set "
        "(NVIDIA_*, CUDA_*, RAY_*, LD_*, ...) are refused.",
    )
    notebook = forms.BooleanField(
        required=False,
        label="JupyterLab on the head",
        help_text="Open it from the cluster's page; only you and the tenant's admins can. "
        "The image must have jupyterlab installed.",
    )
    ssh = forms.BooleanField(
        required=False,
        label="SSH to the head",
        help_text="For gangway ssh and VS Code Remote-SSH: the head accepts the SSH keys of "
        "your profile (and of the team's admins).",
    )

    warning_fields = ("gpu_fraction",)

    def __init__(
        self, *args: Any, tenant: Tenant, role: str | None, user: Any, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.fields["image"] = image_field()
        if settings.CONTAINER_GPUS_SECCOMP_PROFILE:
            self.fields["container_gpus"] = container_gpus_field()
        self.tenant = tenant
        start_on_default_flavor(self, tenant)
        self.is_admin = role == Role.ADMIN
        if not self.is_admin:
            # Offer only what the role may ask for; the service refuses prod anyway.
            self.fields["kind"].choices = [(ClusterKind.DEV, ClusterKind.DEV.label)]  # type: ignore[attr-defined]
            del self.fields["min_workers"]
            del self.fields["max_workers"]
        sharing = [f.name for f in self.fields["flavor"].queryset if f.sharing]  # type: ignore[attr-defined]
        if settings.KAI_ENABLED and sharing:
            self.fields[
                "gpu_fraction"
            ].help_text = f"Dev clusters on {', '.join(sharing)} only. {FRACTION_NOTE}"
        else:
            del self.fields["gpu_fraction"]
        self.fields["ttl_hours"] = ttl_hours_field(tenant)
        add_topology_fields(self)
        add_priority_class_field(self, tenant=tenant, role=role)

    def clean_env(self) -> dict[str, str]:
        return parse_env_lines(self.cleaned_data["env"])

    def specs(self) -> tuple[ClusterSpec, None]:
        """The cleaned form as the request the services take (a cluster has no job part)."""
        return ClusterSpec.from_data(
            {**self.cleaned_data, **topology_wish(self.cleaned_data)}
        ), None


class NotificationPreferencesForm(forms.Form):
    """The user's notification choices: a webhook URL and, per kind, email and webhook
    checkboxes (an unticked box is "off"). Rules are the service's."""

    webhook_url = forms.CharField(
        required=False,
        max_length=500,
        label="Your webhook URL",
        help_text="Optional. Slack-compatible JSON, signed; a new URL gets a new secret, "
        "shown once.",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for kind in EventKind:
            self.fields[f"{kind.value}-email"] = forms.BooleanField(required=False, label="Email")
            self.fields[f"{kind.value}-webhook"] = forms.BooleanField(
                required=False, label="Webhook"
            )

    def lines(self) -> list[PreferenceLine]:
        data = self.cleaned_data
        return [
            PreferenceLine(
                kind=k.value, email=data[f"{k.value}-email"], webhook=data[f"{k.value}-webhook"]
            )
            for k in EventKind
        ]

    def rows(self) -> list[dict[str, Any]]:
        """Per kind: its label and its two checkboxes, for the template."""
        return [
            {
                "kind": k,
                "email": self[f"{k.value}-email"],
                "webhook": self[f"{k.value}-webhook"],
            }
            for k in EventKind
        ]


class WebhookForm(forms.Form):
    """A new tenant webhook (checked again by ``tenant_webhook_create``)."""

    name = forms.CharField(required=False, max_length=80)
    url = forms.CharField(max_length=500, label="URL")
    kinds = forms.MultipleChoiceField(
        choices=EventKind.choices, widget=forms.CheckboxSelectMultiple, label="Events"
    )
