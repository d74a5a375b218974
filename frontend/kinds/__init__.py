"""The dashboard's door to each workload kind's pages: :func:`pages_for` is the one place
that maps a kind to the description its shared views and templates are filled from."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from clusters.models import ClusterRequest
from clusters.rows.spec import ClusterSpec
from frontend.kinds import raycluster as raycluster_pages
from frontend.kinds import rayjob as rayjob_pages
from frontend.kinds import rayservice as rayservice_pages

Action = Callable[[Any, ClusterRequest, str | None, Any], ClusterRequest]


class KindPages(Protocol):
    """What a kind says about its pages (a ``frontend/kinds/<kind>.py`` module)."""

    WORKLOAD: str
    NOUN: str
    PLURAL: str
    HEADING: str
    PATH: str
    LIST_PATH: str
    TEMPLATES: str
    # Its create form's class: ``(data, tenant=, role=, user=)``, a LabelledErrorsForm
    # whose ``specs()`` gives what ``create`` and ``verdict`` take.
    NEW_FORM: type[Any]
    SUBMIT_LABEL: str
    NAV_NEW: str | None
    DETAIL_TITLE: str
    LIST_STATES: tuple[str, ...] | None
    LIST_COLUMNS: tuple[tuple[str, str], ...]
    ACTIONS: dict[str, tuple[Action, str]]
    MANIFESTS: Callable[[ClusterRequest], str] | None
    # Pages only this kind has, under one request and before its actions: (path under
    # the request, the view's dotted path, URL name). Dotted, because the views build on
    # the shared ones, which import this package.
    ROUTES: tuple[tuple[str, str, str], ...]

    def create(
        self,
        *,
        actor: Any,
        tenant: Any,
        role: str | None,
        spec: ClusterSpec | None,
        details: Any,
    ) -> ClusterRequest: ...

    def verdict(
        self, *, tenant: Any, owner: Any, role: str | None, spec: ClusterSpec | None, details: Any
    ) -> dict[str, Any]: ...

    def annotate_row(self, row: ClusterRequest) -> None: ...

    def detail_context(
        self, row: ClusterRequest, *, actor: Any, role: str | None, base_url: str
    ) -> dict[str, Any]: ...

    def page_context(self, row: ClusterRequest) -> dict[str, Any]: ...

    def log_context(self, row: ClusterRequest, query: Mapping[str, Any]) -> dict[str, Any]: ...


def _by_workload(*every: KindPages) -> dict[str, KindPages]:
    return {pages.WORKLOAD: pages for pages in every}


_PAGES = _by_workload(raycluster_pages, rayjob_pages, rayservice_pages)


def pages_for(workload: str) -> KindPages:
    """The pages description of the kind a request row's ``workload`` names."""
    return _PAGES[workload]


# A kind's pages by what they are, and the suffix of their URL names.
_ROUTES = {
    "list": "list",
    "new": "new",
    "verdict": "verdict",
    "detail": "detail",
    "log": "log",
    "manifests": "manifests-download",
    "action": "action",
}


def route_names(kind: KindPages) -> dict[str, str]:
    """The URL names of a kind's pages (``cluster-list``, ``job-detail``, …), by page."""
    return {page: f"{kind.NOUN}-{suffix}" for page, suffix in _ROUTES.items()}


def all_pages() -> dict[str, KindPages]:
    """Every kind's pages, by ``workload`` (the URL configuration routes each)."""
    return dict(_PAGES)


def tenant_home_route() -> str:
    """The URL name of a tenant's home page: the list of the kind listed at the tenant's
    own path (``LIST_PATH`` empty)."""
    return next(route_names(kind)["list"] for kind in _PAGES.values() if not kind.LIST_PATH)
