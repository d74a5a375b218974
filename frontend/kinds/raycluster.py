"""The dashboard's pages of a Ray cluster, as data the shared views and templates fill in:
the words, the list's columns, the detail page's sections, the new form, the buttons and
the log panel. Fragments that only a cluster has are templates under ``TEMPLATES``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from django import forms
from django.core.exceptions import ValidationError

from clusters import selectors
from clusters.domain import shapes
from clusters.domain.states import LIVE, State
from clusters.live import gpu_devices
from clusters.live import pod_logs as cluster_logs
from clusters.live.log_bounds import LogBounds
from clusters.models import ClusterRequest, Workload
from clusters.requests import services
from clusters.requests.dry_run import dry_run_verdict
from clusters.rows.spec import ClusterSpec
from frontend.forms import ClusterForm
from frontend.kinds.applied_objects import applied_yaml, manifests_context

WORKLOAD: str = Workload.CLUSTER
NOUN = "cluster"
PLURAL = "clusters"
HEADING = "Clusters"
# Under the tenant's URL: the new form and one cluster's pages; the list is the tenant's home.
PATH = "clusters/"
LIST_PATH = ""
TEMPLATES = "frontend/kinds/raycluster/"
# The shape form every kind with a Ray cluster of its own starts from.
NEW_FORM = ClusterForm
SUBMIT_LABEL = "Request cluster"
# The tenant menu's link to the new form (a request starts from here most often).
NAV_NEW: str | None = "New cluster"
DETAIL_TITLE = "{name} · {tenant}"
# None: the list filter offers every state of the FilterSet.
LIST_STATES: tuple[str, ...] | None = None
# After Name and Owner, which every kind's list starts with: (heading, cell class).
LIST_COLUMNS: tuple[tuple[str, str], ...] = (
    ("Kind", ""),
    ("Shape", ""),
    ("State", ""),
    ("Where it stands", ""),
)

EXTEND_CHOICES = (4, 24)
LOG_TAILS = (100, 200, 1000, 5000)


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
        """The hours, in the service's bounds."""
        return shapes.validate_extend_hours(self.cleaned_data["hours"])


def _extend(actor: Any, cluster: ClusterRequest, role: str | None, data: Any) -> ClusterRequest:
    form = ExtendForm(data)
    if not form.is_valid():
        raise ValidationError(list(form.errors["hours"]))
    return services.cluster_extend(actor=actor, cluster=cluster, hours=form.cleaned_data["hours"])


# A button: its service (actor, row, the actor's role, the POST data) and what it says done.
# JupyterLab's door: a grant to the notebook on the Ray origin (frontend/views/access.py).
ROUTES: tuple[tuple[str, str, str], ...] = (
    ("notebook/", "frontend.views.access.notebook_open", "cluster-notebook"),
)

ACTIONS: dict[str, tuple[Callable[[Any, ClusterRequest, str | None, Any], ClusterRequest], str]] = {
    "suspend": (
        lambda actor, row, role, data: services.cluster_suspend(actor=actor, cluster=row),
        "Suspended; its GPUs went back to the pool.",
    ),
    "resume": (
        lambda actor, row, role, data: services.cluster_resume(actor=actor, cluster=row),
        "Resumed; it is back in the queue.",
    ),
    "delete": (
        lambda actor, row, role, data: services.cluster_delete(actor=actor, cluster=row),
        "Deletion requested; its GPUs are released once its pods are gone.",
    ),
    "extend": (_extend, "Extended."),
    "keepalive": (
        lambda actor, row, role, data: services.cluster_keepalive(actor=actor, cluster=row),
        "Kept alive: its idle clock starts again.",
    ),
}


def create(
    *, actor: Any, tenant: Any, role: str | None, spec: ClusterSpec | None, details: Any
) -> ClusterRequest:
    """Submit the new form's request (a cluster has no part of its own: ``details``)."""
    assert spec is not None
    return services.cluster_request_create(actor=actor, tenant=tenant, spec=spec)


def verdict(
    *, tenant: Any, owner: Any, role: str | None, spec: ClusterSpec | None, details: Any
) -> dict[str, Any]:
    """The dry-run verdict of the form as it stands."""
    assert spec is not None
    return dry_run_verdict(tenant=tenant, owner=owner, spec=spec, role=role)


def annotate_row(row: ClusterRequest) -> None:
    """What a list row shows besides the row: how to reach the cluster."""
    row.endpoints = selectors.cluster_endpoints(row)  # type: ignore[attr-defined]


def detail_context(
    row: ClusterRequest, *, actor: Any, role: str | None, base_url: str
) -> dict[str, Any]:
    """The cluster's sections of its page (and of the polled fragment); on a DRA
    flavor, the devices its workers got (read live)."""
    devices = gpu_devices.cluster_devices(row) if gpu_devices.wants_devices(row) else None
    return {
        "gpu_devices": devices,
        "endpoints": selectors.cluster_endpoints(row, base_url=base_url),
        "may_extend": services.can_extend(row),
        "is_live": row.state in LIVE,
        "extend_choices": EXTEND_CHOICES,
        "gpu_hours": selectors.cluster_gpu_hours(row),
        "activity": selectors.cluster_activity(row),
        "gpu_utilization": [
            {**gpu, "sparkline": sparkline(gpu["samples"])}
            for gpu in selectors.cluster_gpu_utilization(row)
        ],
    }


def sparkline(samples: list[dict[str, Any]], *, width: int = 120, height: int = 24) -> str:
    """SVG polyline points for utilisation samples (0-100 %), oldest on the left."""
    if not samples:
        return ""
    step = width / max(len(samples) - 1, 1)
    return " ".join(
        f"{i * step:.1f},{height - height * s['utilization'] / 100:.1f}"
        for i, s in enumerate(samples)
    )


# The Kubernetes objects as a download (``manifests.yaml`` beside the page), and on the
# whole page (outside the polled fragment).
MANIFESTS: Callable[[ClusterRequest], str] | None = applied_yaml
page_context = manifests_context


def log_context(row: ClusterRequest, query: Mapping[str, Any]) -> dict[str, Any]:
    """One pod's tail (the head's unless ``pod``), for the log panel; a bad parameter or a
    deleted cluster is a ``ValidationError``."""
    if row.state == State.DELETED:
        raise ValidationError(f"{row.name} was deleted; nothing can be done to it any more.")
    bounds = LogBounds.parse(query)
    pod, container = cluster_logs.parse_choice(query)
    found = cluster_logs.pod_log(row, pod=pod, container=container, bounds=bounds)
    # The first load follows; after that the form says (an unticked box is not sent).
    follow = "pod" not in query or query.get("follow") == "1"
    return {"log": found, "follow": follow, "tail": bounds.tail, "tail_choices": LOG_TAILS}
