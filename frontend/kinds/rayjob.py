"""The dashboard's pages of a batch job, as data the shared views and templates fill in:
the words, the list's columns, the detail page's sections, the new form, the buttons and
the driver's log. Fragments that only a job has are templates under ``TEMPLATES``."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from django import forms
from django.conf import settings
from django.core.exceptions import ValidationError

from clusters import selectors
from clusters.domain.states import State
from clusters.kinds.rayjob import requests as services
from clusters.kinds.rayjob.driver_logs import driver_log
from clusters.kinds.rayjob.selectors import job_hosts_of
from clusters.kinds.rayjob.spec import (
    MAX_DEADLINE_SECONDS,
    MAX_JOB_NAME,
    MAX_TTL_AFTER_FINISHED,
    JobSpec,
)
from clusters.kinds.rayjob.states import JOB_FINISHED
from clusters.live.log_bounds import LogBounds
from clusters.models import ClusterKind, ClusterRequest, Workload
from clusters.requests.services import resolve_flavors
from clusters.rows.spec import ClusterSpec
from frontend.forms import (
    FIELD_LABELS,
    FlavorChoiceField,
    LabelledErrorsForm,
    add_priority_class_field,
    add_topology_fields,
    container_gpus_field,
    image_field,
    start_on_default_flavor,
    topology_wish,
)
from tenants.models import Role, Tenant
from tenants.selectors import flavor_list

WORKLOAD: str = Workload.JOB
NOUN = "job"
PLURAL = "jobs"
HEADING = "Jobs"
PATH = "jobs/"
LIST_PATH = "jobs/"
TEMPLATES = "frontend/kinds/rayjob/"
SUBMIT_LABEL = "Submit job"
# The tenant menu has no link to the new form: the jobs list offers it.
NAV_NEW: str | None = None
DETAIL_TITLE = "{name} · {tenant} jobs"
# The states a job passes through, in the order it does: the list's filter offers these.
LIST_STATES: tuple[str, ...] | None = (
    State.QUEUED,
    State.ADMITTED,
    State.STARTING,
    State.RUNNING,
    State.SUCCEEDED,
    State.FAILED,
    State.STOPPED,
    State.DELETING,
    State.DELETED,
)
LIST_COLUMNS: tuple[tuple[str, str], ...] = (
    ("State", ""),
    ("Where it stands", ""),
    ("Runs on", ""),
    ("Duration", ""),
    ("GPU-hours", "num"),
)
# The Kubernetes objects as a download: a job's page offers none.
MANIFESTS: Callable[[ClusterRequest], str] | None = None

# Once here, a job's driver runs no more: its output can only shrink to the saved tail.
ENDED = JOB_FINISHED | {State.DELETING, State.DELETED}
# The page's tail: enough to see where a run is, small enough to re-send every few seconds.
LOG_BOUNDS = LogBounds(tail=200, limit_bytes=64 * 1024)

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
JOB_SHAPE_FIELDS = (
    "kind",
    "flavor",
    "also_flavors",
    "workers",
    "topology_level",
    "topology_mode",
    "image",
    "container_gpus",
)


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
        add_topology_fields(self)
        add_priority_class_field(self, tenant=tenant, role=role)
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
        shape = {
            k: data.get(k) for k in ("kind", "flavor", "workers", "name", "image", "priority_class")
        }
        shape["container_gpus"] = bool(data.get("container_gpus"))
        shape.update(topology_wish(data))
        names = self.accepted_flavors()
        if names:
            shape["accepted_flavors"] = names  # checked by clean()
        return ClusterSpec.from_data(shape), job


NEW_FORM = JobForm

# A button: its service (actor, row, the actor's role, the POST data) and what it says done.
ROUTES: tuple[tuple[str, str, str], ...] = ()

ACTIONS: dict[str, tuple[Callable[[Any, ClusterRequest, str | None, Any], ClusterRequest], str]] = {
    "stop": (
        lambda actor, row, role, data: services.job_stop(actor=actor, request=row, role=role),
        "Stopped; its GPUs are released once its pods are gone.",
    ),
    "delete": (
        lambda actor, row, role, data: services.job_delete(actor=actor, request=row, role=role),
        "Deletion requested; its GPUs are released once its pods are gone.",
    ),
}


def create(
    *, actor: Any, tenant: Any, role: str | None, spec: ClusterSpec | None, details: Any
) -> ClusterRequest:
    """Submit the new form's job (``spec`` is None for one on the user's dev cluster)."""
    assert isinstance(details, JobSpec)
    return services.job_create(actor=actor, tenant=tenant, spec=spec, job=details, role=role)


def verdict(
    *, tenant: Any, owner: Any, role: str | None, spec: ClusterSpec | None, details: Any
) -> dict[str, Any]:
    """The dry-run verdict of the form as it stands, with the job's own checks."""
    return services.job_dry_run(tenant=tenant, owner=owner, spec=spec, job=details, role=role)


def annotate_row(row: ClusterRequest) -> None:
    """What a list row shows besides the row: its GPU-hours (from the prefetched spans)."""
    row.gpu_hours = round(selectors.gpu_hours_of(row), 2)  # type: ignore[attr-defined]


def detail_context(
    row: ClusterRequest, *, actor: Any, role: str | None, base_url: str
) -> dict[str, Any]:
    """The job's sections of its page (and of the polled fragment)."""
    run = row.job
    return {
        "run": run,
        "runtime_env": json.dumps(run.runtime_env, indent=2, sort_keys=True)
        if run.runtime_env
        else "",
        "may_stop": row.state in services.STOPPABLE,
        "may_delete": row.state not in (State.DELETING, State.DELETED),
        "gpu_hours": round(selectors.gpu_hours_of(row), 2),
    }


def log_context(row: ClusterRequest, query: Mapping[str, Any]) -> dict[str, Any]:
    """The last lines of the driver's output (bounded by :data:`LOG_BOUNDS`), or why there
    are none, and whether the panel should still ask."""
    log = driver_log(row, LOG_BOUNDS)
    # A driver that ended and whose pods are gone has said all it will: the saved tail
    # (or nothing) is final, so the panel stops asking.
    ended = row.state in ENDED
    done = row.state == State.DELETED or (ended and log.origin != "pod")
    # ``log_ended``: its output is complete (the panel still asks, until the pods go and
    # the saved tail is final, but nothing new is printed).
    return {"log": log, "log_done": done, "log_ended": ended}


def page_context(row: ClusterRequest) -> dict[str, Any]:
    """What only the whole page shows (outside the polled fragment): the driver's log."""
    return log_context(row, {})
