"""The dashboard's pages of a Ray Serve service, as data the shared views and templates
fill in: the words, the list's columns, the detail page's sections (its applications
and deployments, the clusters serving and the upgrade in progress), the new form and the
buttons. Fragments that only a service has are templates under ``TEMPLATES``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from clusters import selectors
from clusters.domain.states import State
from clusters.kinds.rayservice import endpoint_access as serve_access
from clusters.kinds.rayservice import endpoint_counts as serve_counts
from clusters.kinds.rayservice import requests as serving
from clusters.kinds.rayservice import upgrade
from clusters.kinds.rayservice.output import curl_example, endpoint_url, surge_out
from clusters.kinds.rayservice.spec import ServiceSpec
from clusters.kube.manifests import cluster_manifests, to_yaml
from clusters.models import ClusterRequest, Workload
from clusters.queue.backends import manifest_options
from clusters.requests import rules
from clusters.requests.dry_run import dry_run_verdict
from clusters.rows.spec import ClusterSpec
from tenants.models import Role

WORKLOAD: str = Workload.SERVICE
NOUN = "service"
PLURAL = "services"
HEADING = "Services"
PATH = "services/"
LIST_PATH = "services/"
TEMPLATES = "frontend/kinds/rayservice/"
# Named, not imported: the dashboard's forms sit above clusters/ in the layers.
NEW_FORM = "frontend.forms.ServiceForm"
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

    def check(candidate: ClusterSpec) -> ClusterRequest:
        return serving.service_check(
            actor=owner, tenant=tenant, spec=candidate, service=details, role=role
        )[0]

    return dry_run_verdict(tenant=tenant, owner=owner, spec=spec, role=role, kind_check=check)


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
        "may_delete": row.state not in (State.DELETING, State.DELETED),
        "gpu_hours": selectors.cluster_gpu_hours(row),
        "endpoint_url": url,
        "endpoint_curl": curl_example(url, row.service.public),
        "endpoint_requests": serve_counts.requests_total(row.service),
        "may_manage_tokens": may_manage_tokens,
        "may_set_public": role == Role.ADMIN,
        "tokens": list(serve_access.service_tokens(request=row)) if may_manage_tokens else [],
    }


def manifests_yaml(row: ClusterRequest) -> str:
    """The service's RayService as gangway applies it."""
    return to_yaml(cluster_manifests(row, **manifest_options()))


MANIFESTS: Callable[[ClusterRequest], str] | None = manifests_yaml


def page_context(row: ClusterRequest) -> dict[str, Any]:
    """What only the whole page shows: the manifests."""
    return {} if row.state == State.DELETED else {"manifests_yaml": manifests_yaml(row)}


def log_context(row: ClusterRequest, query: Mapping[str, Any]) -> dict[str, Any]:
    """A service's page has no log panel (its Ray cluster's pods are KubeRay's)."""
    return {}
