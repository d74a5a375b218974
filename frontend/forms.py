"""The dashboard's create forms: the API's create bodies (clusters, jobs) as Django forms.

It only parses and offers choices; every rule (shape limits, policy, caps, who may ask
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
from clusters.kinds.rayjob.selectors import job_hosts_of
from clusters.kinds.rayjob.spec import (
    MAX_DEADLINE_SECONDS,
    MAX_JOB_NAME,
    MAX_TTL_AFTER_FINISHED,
    JobSpec,
)
from clusters.kinds.rayservice.spec import (
    INCREMENTAL,
    UPGRADE_TYPES,
    ServiceSpec,
)
from clusters.models import ClusterKind
from clusters.requests.services import resolve_flavors
from clusters.rows.spec import ClusterSpec
from notifications.event_kinds import EventKind
from notifications.services import PreferenceLine
from tenants.models import Role, Tenant
from tenants.selectors import default_flavor_name, flavor_list, unknown_flavor_message

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

    def clean_env(self) -> dict[str, str]:
        return parse_env_lines(self.cleaned_data["env"])

    def specs(self) -> tuple[ClusterSpec, None]:
        """The cleaned form as the request the services take (a cluster has no job part)."""
        return ClusterSpec.from_data(self.cleaned_data), None


# Where the services' runtime_env faults go: each part of runtime_env has its own input.
RUNTIME_ENV_FIELDS = {
    "flavors": "also_flavors",
    "runtime_env.working_dir": "working_dir",
    "runtime_env.pip": "pip",
    "runtime_env.env_vars": "env_vars",
}
JOB_FIELD_LABELS = {
    **FIELD_LABELS,
    "entrypoint": "Entrypoint",
    "cluster": "Run on my dev cluster",
    "runtime_env": "Runtime environment",
    "runtime_env.py_modules": "Python modules",
    "active_deadline_seconds": "Active deadline",
    "ttl_seconds_after_finished": "Keep after finishing",
}
# The inputs that shape a job's own Ray cluster: ignored (and hidden by gangway.js) when
# the job runs on one of its owner's dev clusters instead.
JOB_SHAPE_FIELDS = ("kind", "flavor", "also_flavors", "workers", "image", "container_gpus")


class JobForm(LabelledErrorsForm):
    """The new-job form: the jobs API's create body as inputs (``runtime_env`` split into
    working_dir, pip packages one per line and ``KEY=VALUE`` environment lines).

    Like :class:`ClusterForm`, it parses and offers choices only; the checks are
    :func:`clusters.kinds.rayjob.requests.job_check`'s, whose ``ValidationError`` comes back on
    these fields through :meth:`add_service_errors`. Entrypoint and host are free text
    here on purpose, so that their faults read in the service's words.
    """

    entrypoint = forms.CharField(
        required=False,
        strip=False,  # the service strips it, and words its limits
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text='The shell command that starts the driver, e.g. "python train.py".',
    )
    name = forms.CharField(
        required=False,
        help_text="Optional; lower-case letters, digits and dashes, at most "
        f"{MAX_JOB_NAME}. Generated when empty.",
    )
    cluster = forms.CharField(
        required=False,
        label=JOB_FIELD_LABELS["cluster"],
        help_text="Runs on GPUs you already hold and skips the queue; the shape below is "
        "then ignored.",
    )
    kind = forms.ChoiceField(required=False, choices=ClusterKind.choices, initial=ClusterKind.DEV)
    flavor = FlavorChoiceField(queryset=flavor_list(), to_field_name="name", empty_label=None)
    also_flavors = forms.CharField(
        required=False,
        label="Or else, in order",
        help_text="Other GPU flavors the job may run on, most preferred first, e.g. l4 "
        "(comma-separated). It starts on the first that fits now, never on two.",
    )
    workers = forms.IntegerField(required=False, min_value=0, max_value=1024, initial=1)
    working_dir = forms.CharField(
        required=False,
        label="Working directory",
        help_text="A remote URI the Ray cluster can fetch, e.g. s3://bucket/code.zip.",
    )
    pip = forms.CharField(
        required=False,
        label="pip packages",
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="One requirement per line, e.g. torch==2.4.0 (no pip options: the platform "
        "chooses the package index).",
    )
    env_vars = forms.CharField(
        required=False,
        label="Environment variables",
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="KEY=VALUE, one per line.",
    )
    active_deadline_seconds = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=MAX_DEADLINE_SECONDS,
        label="Active deadline (seconds)",
        help_text="Stop the job this long after it started; empty for no deadline.",
    )
    ttl_seconds_after_finished = forms.IntegerField(
        required=False,
        min_value=0,
        max_value=MAX_TTL_AFTER_FINISHED,
        initial=0,
        label="Keep after finishing (seconds)",
        help_text="Keep the finished job's Ray cluster this long for inspection; its GPUs "
        "count until its pods are gone.",
    )

    shape_fields: tuple[str, ...] = JOB_SHAPE_FIELDS
    error_inputs = RUNTIME_ENV_FIELDS
    error_labels = JOB_FIELD_LABELS

    def __init__(
        self, *args: Any, tenant: Tenant, role: str | None, user: Any, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.tenant = tenant
        hosts = job_hosts_of(tenant=tenant, owner=user)
        start_on_default_flavor(self, tenant)
        if role != Role.ADMIN:
            # Offer only what the role may ask for; the service refuses prod anyway.
            self.fields["kind"].choices = [(ClusterKind.DEV, ClusterKind.DEV.label)]  # type: ignore[attr-defined]
        # Shape inputs: a job on one of the user's clusters runs in that cluster's image.
        self.fields["image"] = image_field()
        if settings.CONTAINER_GPUS_SECCOMP_PROFILE:
            self.fields["container_gpus"] = container_gpus_field()
        # A select of the user's ready dev clusters; the value stays free text so that a
        # cluster that stopped being ready is refused in the service's words.
        self.fields["cluster"].widget = forms.Select(
            choices=[("", "No: a Ray cluster of its own"), *((h, h) for h in hosts)],
            attrs={"data-hides-shape": "true"},
        )
        if not hosts:
            self.fields["cluster"].help_text = (
                f"You have no ready dev cluster in {tenant.slug}: the job gets a Ray cluster "
                "of its own."
            )

    def clean(self) -> dict[str, Any]:
        """A job on one of the user's clusters takes that cluster's shape: faults of the
        shape inputs (hidden then) would block it for nothing the user can see."""
        cleaned = super().clean() or {}
        if cleaned.get("cluster"):
            for name in JOB_SHAPE_FIELDS:
                self.errors.pop(name, None)
        elif self.accepted_flavors():
            try:
                resolve_flavors(list(self.accepted_flavors()))
            except ValidationError as exc:
                for message in exc.message_dict["flavors"]:
                    self.add_error("also_flavors", message)
        return cleaned

    def clean_also_flavors(self) -> list[str]:
        """The fallback flavors' names, in order (the list's rules are the services':
        unknown, repeated or too many names are refused in their words)."""
        raw = self.cleaned_data.get("also_flavors") or ""
        return [name.strip() for name in raw.replace(",", " ").split() if name.strip()]

    def accepted_flavors(self) -> tuple[str, ...]:
        """The flavor first, then the fallbacks; empty when there are none."""
        also = self.cleaned_data.get("also_flavors") or []
        flavor = self.cleaned_data.get("flavor")
        if not also or flavor is None:
            return ()
        return (flavor.name, *also)

    def clean_env_vars(self) -> dict[str, str]:
        """``KEY=VALUE`` lines as a dict (the value may hold ``=``); blank lines skipped.
        Names and values are the service's to judge."""
        variables: dict[str, str] = {}
        faults = []
        for number, line in enumerate(self.cleaned_data["env_vars"].splitlines(), start=1):
            if not line.strip():
                continue
            key, sep, value = line.partition("=")
            if not sep or not key.strip():
                faults.append(f"Line {number}: write KEY=VALUE.")
                continue
            variables[key.strip()] = value
        if faults:
            raise ValidationError(faults)
        return variables

    def runtime_env(self) -> dict[str, Any]:
        """The inputs as the ``runtime_env`` the service checks (only the parts given)."""
        data = self.cleaned_data
        env: dict[str, Any] = {}
        if data["working_dir"].strip():
            env["working_dir"] = data["working_dir"].strip()
        packages = [line.strip() for line in data["pip"].splitlines() if line.strip()]
        if packages:
            env["pip"] = packages
        if data["env_vars"]:
            env["env_vars"] = data["env_vars"]
        return env

    def specs(self) -> tuple[ClusterSpec | None, JobSpec]:
        """The cleaned form as the services take it: the shape (``None`` for a job on one
        of the user's clusters, whose shape is the host's) and the job's own fields."""
        data = self.cleaned_data
        job = JobSpec(
            entrypoint=data["entrypoint"],
            runtime_env=self.runtime_env(),
            active_deadline_seconds=data["active_deadline_seconds"],
            ttl_seconds_after_finished=data["ttl_seconds_after_finished"] or 0,
            host=data["cluster"] or None,
            name=data["name"] or None,
        )
        if job.host:
            return None, job
        shape = {k: data.get(k) for k in ("kind", "flavor", "workers", "name", "image")}
        shape["container_gpus"] = bool(data.get("container_gpus"))
        names = self.accepted_flavors()
        if names:
            shape["accepted_flavors"] = names  # checked by clean()
        return ClusterSpec.from_data(shape), job


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


class ServiceForm(ClusterForm):
    """The new-service form: a cluster's shape (no time to live: a service runs until
    deleted), its Serve config and upgrade strategy. The checks are
    :func:`clusters.kinds.rayservice.requests.service_check`'s."""

    serve_config = forms.CharField(
        strip=False,
        label="Serve config",
        widget=forms.Textarea(attrs={"rows": 12, "spellcheck": "false"}),
        help_text="Ray Serve's config (serveConfigV2) as YAML: applications with "
        "import_path and deployments (ray_actor_options.num_gpus, autoscaling_config).",
    )
    upgrade_type = forms.ChoiceField(
        choices=[(t, t) for t in UPGRADE_TYPES if t != INCREMENTAL],
        initial="NewCluster",
        label="Upgrade strategy",
        help_text="NewCluster: a changed Ray cluster comes up beside the old one and "
        "takes the traffic when ready; None: cluster changes are not rolled out.",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        del self.fields["ttl_hours"]
        self.fields["name"].required = True

    def specs(self) -> tuple[ClusterSpec, ServiceSpec]:  # type: ignore[override]
        """The cleaned form as the services take it: the shape and the service's part."""
        data = self.cleaned_data
        service = ServiceSpec(serve_config=data["serve_config"], upgrade_type=data["upgrade_type"])
        return ClusterSpec.from_data(data), service
