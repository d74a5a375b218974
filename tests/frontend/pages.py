"""Every dashboard page a role may open, enumerated from the URL configuration, and the
data their forms need; shared by the browser tests that walk all of them.

The pages are the GET routes of the URLconf that the access tables
(``tests/access/routes_*.py``) declare as session routes; the route matrix fails on a
route no table declares, so a new page is walked here as soon as it exists. Each
route's kwargs builders create the object it shows (a ready cluster, a queued request, a
job, a webhook, a cohort...), and the targets of the POST routes are built too, so that
the pages render the forms that act on them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from django.urls import get_resolver

from clusters.kinds.rayjob.requests import job_create
from clusters.kinds.rayjob.spec import JobSpec
from clusters.rows.spec import ClusterSpec
from tests.access.matrix import url_kwargs
from tests.access.test_route_matrix import ROUTES, _walk
from tests.frontend.conftest import make_ready
from tests.frontend.test_browser import sign_in

# Routes that answer GET but are not pages to look at: a download, Ray's own dashboard
# behind the proxy (tests/clusters/live), and the fragments htmx swaps into a page
# (walked as part of that page).
NOT_PAGES = (".yaml", "/ray/{path}", "/log/")
# The roles of issue #41: viewer, engineer, tenant admin of acme; the platform admin.
ROLES = ("viewer", "engineer", "admin", "platform")


def populate(world: SimpleNamespace, request_cluster: Any) -> None:
    """The objects the pages show: bob's ready dev cluster with its history and a queued
    job (made through the services, as a user's would be), then every route's own
    targets from the access tables."""
    bob, acme = world.actors["engineer"], world.acme
    l4 = acme.quotas.get(flavor__name="l4").flavor
    ready = make_ready(request_cluster(bob, name="bob-dev", flavor=l4))
    acme.max_dev_clusters_per_user = acme.max_dev_gpus_per_user = 4
    acme.save()
    job_create(
        actor=bob,
        tenant=acme,
        spec=ClusterSpec(kind="dev", flavor=ready.flavor, workers=1),
        job=JobSpec(entrypoint="python train.py", runtime_env={}, name="bob-job"),
    )
    for _, route in sorted(ROUTES.items()):
        if route.session:
            for case in route.methods.values():
                url_kwargs(world, route, case)


def dashboard_pages(world: SimpleNamespace, role: str) -> list[str]:
    """The paths of every dashboard page ``role`` may open (a 200 in the access table),
    and the home page (public in the table, as it sends anonymous visitors to sign in)."""
    pages = ["/"]
    for template, _ in _walk(get_resolver()):
        route = ROUTES.get(template)
        if route is None or not route.session or "GET" not in route.methods:
            continue
        if any(part in template for part in NOT_PAGES):
            continue
        case = route.methods["GET"]
        if case.expect[role] == 200:
            pages.append("/" + template.format(**url_kwargs(world, route, case)))
    return pages


def settle(page: Any, base: str, path: str) -> None:
    """Open a page and let its htmx requests (a verdict, a polled table) land."""
    response = page.goto(base + path)
    assert response is not None and response.status == 200, (path, response and response.status)
    page.wait_for_load_state("networkidle")


@dataclass
class Walk:
    """A signed-in browser context and the pages its role may open."""

    context: Any
    page: Any
    base: str
    paths: list[str]

    def visit(self) -> Iterator[str]:
        """Open each page in turn (settled), yielding its path."""
        for path in self.paths:
            settle(self.page, self.base, path)
            yield path


def walk_as(
    browser: Any,
    live_server: Any,
    world: SimpleNamespace,
    request_cluster: Any,
    role: str,
    **context_options: Any,
) -> Walk:
    """The data populated, ``role`` signed in in a new context, its pages listed."""
    populate(world, request_cluster)
    context = browser.new_context(**context_options)
    page = context.new_page()
    sign_in(page, live_server.url, world.actors[role].username)
    return Walk(context, page, live_server.url, dashboard_pages(world, role))
