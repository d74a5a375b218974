"""The dashboard's pages of a Ray Serve service, as data the shared views and templates
fill in: the words, the list's columns, the detail page's sections (its applications
and deployments, the clusters serving and the upgrade in progress), the new form and the
buttons. Fragments that only a service has are templates under ``TEMPLATES``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from django import forms

from clusters import selectors
from clusters.domain.states import State
from clusters.kinds.rayservice import endpoint_access, endpoint_counts, upgrade
from clusters.kinds.rayservice import requests as serving
from clusters.kinds.rayservice.output import (
    autoscale_out,
    curl_example,
    endpoint_url,
    surge_out,
)
from clusters.kinds.rayservice.spec import (
    INCREMENTAL,
    SCALE_TO_ZERO_BOUNDS,
    SCALE_TO_ZERO_MINUTES,
    UPGRADE_OPTIONS,
    UPGRADE_TYPES,
    ServiceSpec,
)
from clusters.models import ClusterRequest, Workload
from clusters.requests import rules
from clusters.rows.spec import ClusterSpec
from demo_serve.serve_config import SERVE_CONFIG
from frontend.forms import ClusterForm, topology_wish
from frontend.kinds.applied_objects import applied_yaml, manifests_context
from tenants.models import Role

WORKLOAD: str = Workload.SERVICE
NOUN = "service"
PLURAL = "services"
HEADING = "Services"
PATH = "services/"
LIST_PATH = "services/"
TEMPLATES = "frontend/kinds/rayservice/"
SUBMIT_LABEL = "Create service"
# The tenant menu has no link to the new form: the services list offers it.
NAV_NEW: str | None = None
DETAIL_TITLE = "{name} · {tenant} services"
# The states a service passes through, in the order it does.
LIST_STATES: tuple[str, ...] | None = (
    State.QUEUED,
    State.ADMITTED,
    State.STARTING,
    State.READY,
    State.SUSPENDED,
    State.FAILED,
    State.DELETING,
    State.DELETED,
)
LIST_COLUMNS: tuple[tuple[str, str], ...] = (
    ("Shape", ""),
    ("State", ""),
    ("Where it stands", ""),
    ("Applications", ""),
)


# What a newcomer sees in the empty Serve config box: the demo service's config.
SERVE_CONFIG_EXAMPLE = SERVE_CONFIG.rstrip()


def _upgrade_option(key: str, label: str, help_text: str) -> forms.IntegerField:
    """An input of KubeRay's ``clusterUpgradeOptions`` within spec.py's bounds."""
    low, high = UPGRADE_OPTIONS[key]
    return forms.IntegerField(
        required=False,
        min_value=low,
        max_value=high,
        label=label,
        help_text=f"{INCREMENTAL} only: {help_text}",
    )


class ServiceForm(ClusterForm):
    """The new-service form: a cluster's shape (no time to live: a service runs until
    deleted), its Serve config and upgrade strategy. The checks are
    :func:`clusters.kinds.rayservice.requests.service_check`'s."""

    serve_config = forms.CharField(
        strip=False,
        label="Serve config",
        widget=forms.Textarea(
            attrs={"rows": 12, "spellcheck": "false", "placeholder": SERVE_CONFIG_EXAMPLE}
        ),
        help_text="Ray Serve's config (serveConfigV2) as YAML: applications with "
        "import_path and deployments (ray_actor_options.num_gpus, autoscaling_config).",
    )
    upgrade_type = forms.ChoiceField(
        choices=[(t, t) for t in UPGRADE_TYPES],
        initial="NewCluster",
        label="Upgrade strategy",
        widget=forms.RadioSelect,
        help_text="NewCluster: a changed Ray cluster comes up beside the old one and "
        f"takes the traffic when ready; {INCREMENTAL}: it comes up step by step, capacity "
        "and traffic moving over in steps (a production service with min workers < max "
        "workers only, as KubeRay requires); None: cluster changes are not rolled out.",
    )
    max_surge_percent = _upgrade_option(
        "maxSurgePercent",
        "Max surge (%)",
        "how much capacity the new cluster may add at a time, in percent of the "
        "service's (empty: KubeRay's 100).",
    )
    step_size_percent = _upgrade_option(
        "stepSizePercent",
        "Traffic step (%)",
        "the share of traffic moved at each step (at most the max surge).",
    )
    interval_seconds = _upgrade_option(
        "intervalSeconds", "Step interval (seconds)", "the time between two traffic steps."
    )

    scale_to_zero = forms.BooleanField(
        required=False,
        label="Scale to zero when idle",
        help_text="Give its GPUs back after the minutes below without a request; the next "
        "request wakes it (a cold start: 503 with Retry-After until it serves again).",
    )
    scale_to_zero_after_minutes = forms.IntegerField(
        required=False,
        initial=SCALE_TO_ZERO_MINUTES,
        min_value=SCALE_TO_ZERO_BOUNDS[0],
        max_value=SCALE_TO_ZERO_BOUNDS[1],
        label="Scale to zero after (minutes without requests)",
    )

    # The upgrade strategy's errors (spec.py's) are shown on the strategy's choice.
    error_inputs = {"upgrade_strategy": "upgrade_type"}
    shown_when = {
        name: ("upgrade_type", INCREMENTAL)
        for name in ("max_surge_percent", "step_size_percent", "interval_seconds")
    }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        del self.fields["ttl_hours"]
        self.fields["name"].required = True
        # A service is charged at its guaranteed size and grows into borrowed quota
        # (docs/services.md), unlike a cluster, which is charged at its largest.
        if "max_workers" in self.fields:  # a tenant that may ask for production
            self.fields["max_workers"].help_text = (
                "Production autoscaling only. The quota is charged for min workers; the "
                "service grows towards max into borrowed quota when Serve wants more "
                "replicas, and may be scaled back to min when that quota is reclaimed."
            )

    def clean(self) -> dict[str, Any]:
        """An incremental upgrade's options, each on its own input: required where
        KubeRay requires them, ignored (not sent) for the other strategies."""
        data = super().clean() or {}
        if data.get("upgrade_type") != INCREMENTAL:
            return data
        for field in ("step_size_percent", "interval_seconds"):
            if data.get(field) is None and field not in self.errors:
                self.add_error(field, f"Required for {INCREMENTAL}.")
        step, surge = data.get("step_size_percent"), data.get("max_surge_percent")
        if step is not None and surge is not None and step > surge:
            self.add_error("step_size_percent", "At most the max surge, as KubeRay requires.")
        return data

    def upgrade_options(self) -> dict[str, int]:
        """KubeRay's ``clusterUpgradeOptions`` from the form (empty unless incremental)."""
        data = self.cleaned_data
        if data.get("upgrade_type") != INCREMENTAL:
            return {}
        named = {
            "maxSurgePercent": data.get("max_surge_percent"),
            "stepSizePercent": data.get("step_size_percent"),
            "intervalSeconds": data.get("interval_seconds"),
        }
        return {key: value for key, value in named.items() if value is not None}

    def specs(self) -> tuple[ClusterSpec, ServiceSpec]:  # type: ignore[override]
        """The cleaned form as the services take it: the shape and the service's part."""
        data = self.cleaned_data
        minutes = data.get("scale_to_zero_after_minutes")
        service = ServiceSpec(
            serve_config=data["serve_config"],
            upgrade_type=data["upgrade_type"],
            upgrade_options=self.upgrade_options(),
            scale_to_zero=bool(data.get("scale_to_zero")),
            scale_to_zero_after_minutes=SCALE_TO_ZERO_MINUTES if minutes is None else minutes,
        )
        return ClusterSpec.from_data({**data, **topology_wish(data)}), service


NEW_FORM = ServiceForm

# The endpoint's controls: invoke tokens and public or private (service_endpoint.py).
ROUTES: tuple[tuple[str, str, str], ...] = (
    ("tokens/", "frontend.views.service_endpoint.service_token_create", "service-token-create"),
    (
        "tokens/<int:token_id>/revoke/",
        "frontend.views.service_endpoint.service_token_revoke",
        "service-token-revoke",
    ),
    ("public/", "frontend.views.service_endpoint.service_public", "service-public"),
)

ACTIONS: dict[str, tuple[Callable[[Any, ClusterRequest, str | None, Any], ClusterRequest], str]] = {
    "delete": (
        lambda actor, row, role, data: serving.service_delete(actor=actor, request=row, role=role),
        "Deletion requested; its GPUs are released once its pods are gone.",
    ),
}


def create(
    *, actor: Any, tenant: Any, role: str | None, spec: ClusterSpec | None, details: Any
) -> ClusterRequest:
    """Create the new form's service."""
    assert spec is not None and isinstance(details, ServiceSpec)
    return serving.service_create(actor=actor, tenant=tenant, spec=spec, service=details, role=role)


def verdict(
    *, tenant: Any, owner: Any, role: str | None, spec: ClusterSpec | None, details: Any
) -> dict[str, Any]:
    """The dry-run verdict of the form as it stands, with the service's own checks."""
    assert spec is not None and isinstance(details, ServiceSpec)
    return serving.service_dry_run(
        tenant=tenant, owner=owner, spec=spec, service=details, role=role
    )


def annotate_row(row: ClusterRequest) -> None:
    """A list row shows the service's details as they are (loaded with the row)."""


def detail_context(
    row: ClusterRequest, *, actor: Any, role: str | None, base_url: str
) -> dict[str, Any]:
    """The service's sections of its page (and of the polled fragment): its endpoint
    with a curl example, its requests and, for its owner and the tenant's admins, its
    invoke tokens."""
    url = endpoint_url(row.tenant.slug, row.name)
    may_manage_tokens = rules.can_manage(actor=actor, cluster=row, role=role)
    return {
        "serving": row.service,
        "upgrade_surge": surge_out(upgrade.surge_of(row)),
        "autoscale": autoscale_out(
            row, row.events.filter(reason="growth_reclaimed").order_by("-at")[:1]
        ),
        "may_delete": row.state not in (State.DELETING, State.DELETED),
        "gpu_hours": selectors.cluster_gpu_hours(row),
        "endpoint_url": url,
        "endpoint_curl": curl_example(url, row.service.public),
        "endpoint_requests": endpoint_counts.requests_total(row.service),
        "may_manage_tokens": may_manage_tokens,
        "may_set_public": role == Role.ADMIN,
        "tokens": list(endpoint_access.service_tokens(request=row)) if may_manage_tokens else [],
    }


# The Kubernetes objects as a download (``manifests.yaml`` beside the page), and on the
# whole page (outside the polled fragment).
MANIFESTS: Callable[[ClusterRequest], str] | None = applied_yaml
page_context = manifests_context


def log_context(row: ClusterRequest, query: Mapping[str, Any]) -> dict[str, Any]:
    """A service's page has no log panel (its Ray cluster's pods are KubeRay's)."""
    return {}
