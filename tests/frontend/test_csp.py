"""Every page renders in Chromium under the Content-Security-Policy without one violation.

The pages are the dashboard's (every GET route of ``tests/access/routes_frontend.py``,
so a new page is covered as soon as the access matrix knows it), the sign-in page, the
Django admin (index, and each registered model's list, add and change forms) and the
Swagger UI at ``/api/docs/``. A listener added before any page script runs records each
``securitypolicyviolation``; console messages about the CSP or the Permissions-Policy
and uncaught page errors are recorded too. Pages that poll with htmx are watched until
one swap has landed, so content swapped in is checked as well.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import tests.frontend.browser  # noqa: F401  (sets DJANGO_ALLOW_ASYNC_UNSAFE first)
from clusters.kinds.rayjob.requests import job_create
from clusters.kinds.rayjob.spec import JobSpec
from clusters.models import ClusterRequest
from clusters.rows.spec import ClusterSpec
from tests.access.routes_frontend import ROUTES
from tests.frontend.conftest import make_ready
from tests.frontend.test_browser import sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

RECORDER = """
window.__violations = [];
window.__swaps = 0;
document.addEventListener("securitypolicyviolation", (event) => {
  window.__violations.push(
    `${event.violatedDirective} blocked ${event.blockedURI || "inline"} ` +
    `at ${event.sourceFile}:${event.lineNumber} ${event.sample}`
  );
}, true);
document.addEventListener("htmx:afterSettle", () => { window.__swaps += 1; });
"""


class Watcher:
    """Collects what a page reports: CSP violations, policy console messages, errors."""

    def __init__(self, page: Any) -> None:
        self.page = page
        self.problems: list[str] = []
        page.add_init_script(RECORDER)
        page.on("console", self._console)
        page.on("pageerror", lambda error: self.problems.append(f"page error: {error}"))

    def _console(self, message: Any) -> None:
        text = message.text
        if "Content Security Policy" in text or "Permissions-Policy" in text:
            self.problems.append(f"console: {text}")

    def visit(self, url: str) -> dict[str, str]:
        """Open ``url``, let it settle (one htmx swap if it polls); return its headers."""
        response = self.page.goto(url)
        assert response is not None and response.status == 200, (url, response and response.status)
        self.page.wait_for_load_state("networkidle")
        if self.page.locator("[hx-trigger*='every'], [hx-trigger*='load']").count():
            self.page.wait_for_function("() => window.__swaps >= 1", timeout=15_000)
        self.collect(url)
        headers: dict[str, str] = response.all_headers()
        return headers

    def collect(self, url: str) -> None:
        for violation in self.page.evaluate("window.__violations"):
            self.problems.append(f"{url}: {violation}")


def assert_policy_headers(url: str, headers: dict[str, str]) -> None:
    csp = headers.get("content-security-policy", "")
    for directive in (
        "default-src 'self'",
        "object-src 'none'",
        "base-uri 'self'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ):
        assert directive in csp, (url, csp)
    assert "unsafe-inline" not in csp and "unsafe-eval" not in csp, (url, csp)
    permissions = headers.get("permissions-policy", "")
    for feature in ("camera=()", "microphone=()", "geolocation=()", "usb=()", "payment=()"):
        assert feature in permissions, (url, permissions)


@pytest.fixture
def scene(acme: Any, bob: Any, root: Any, request_cluster: Any) -> Iterator[dict[str, str]]:
    """A ready cluster (usage bars, connection details), a queued one, a queued job (its
    page with the log panel), and the catalogue."""
    ready = make_ready(request_cluster(bob, name="bob-ready"))
    request_cluster(bob, name="bob-waits")  # no admission pass runs: it stays queued
    assert ClusterRequest.objects.get(name="bob-waits").state == "queued"
    acme.max_dev_clusters_per_user = acme.max_dev_gpus_per_user = 3  # the job is his third
    acme.save()
    job = job_create(
        actor=bob,
        tenant=acme,
        spec=ClusterSpec(kind="dev", flavor=ready.flavor, workers=1),
        job=JobSpec(entrypoint="python train.py", runtime_env={"pip": ["numpy"]}, name="bob-job"),
    )
    yield {"slug": acme.slug, "name": ready.name, "job": job.name}


def dashboard_pages(kwargs: dict[str, str]) -> list[str]:
    pages = ["/"]
    for template, route in sorted(ROUTES.items()):
        if template.endswith("/log/"):
            continue  # a fragment htmx fetches into the job's page, checked there
        if "/ray/" in template or template.endswith("/notebook/"):
            # The Ray dashboard's and JupyterLab's own pages, served on the clusters'
            # origin (tests/clusters/live).
            continue
        if "GET" in route.methods:
            name = kwargs["job"] if "/jobs/" in template else kwargs["name"]
            # The route's own targets (a flavor's name, a tenant's slug) where it has them.
            own = route.kwargs if isinstance(route.kwargs, dict) else {}
            pages.append("/" + template.format(**{**kwargs, "name": name, **own}))
    pages.append(f"/t/{kwargs['slug']}/clusters/bob-waits/")
    return pages


def admin_pages(staff: Any) -> list[str]:
    """The admin index, and every registered model's list, add and change forms."""
    from django.contrib import admin
    from django.test import RequestFactory
    from django.urls import reverse

    request = RequestFactory().get("/admin/")
    request.user = staff
    pages = ["/admin/"]
    for model, model_admin in admin.site._registry.items():
        info = f"admin:{model._meta.app_label}_{model._meta.model_name}"
        pages.append(reverse(f"{info}_changelist"))
        if model_admin.has_add_permission(request):
            pages.append(reverse(f"{info}_add"))
        first = model._default_manager.order_by("pk").first()
        if first is not None:
            pages.append(reverse(f"{info}_change", args=[first.pk]))
    return pages


def test_every_page_renders_without_a_policy_violation(
    page: Any, live_server: Any, browser_env: None, scene: dict[str, str], root: Any
) -> None:
    base = live_server.url
    watcher = Watcher(page)
    assert_policy_headers("/login/", watcher.visit(f"{base}/login/"))
    sign_in(page, base, "root")
    watcher.collect("/login/ (signing in)")

    visited = []
    for path in [*dashboard_pages(scene), *admin_pages(root)]:
        if path.endswith(".yaml"):
            # A download (Content-Disposition: attachment) is not a page to render: the
            # browser would start a download instead. Its headers are checked all the same.
            response = page.request.get(base + path)
            assert response.status == 200, (path, response.status)
            assert_policy_headers(path, response.headers)
        else:
            assert_policy_headers(path, watcher.visit(base + path))
        visited.append(path)
    assert len(visited) >= 10 and any(p.startswith("/admin/tenants/tenant/") for p in visited)
    assert not watcher.problems, "\n".join(watcher.problems)
    # The bars take their width from a script now that style="" is refused.
    watcher.visit(f"{base}/t/{scene['slug']}/usage/")
    assert page.locator(".meter-fill").first.evaluate("e => e.style.width") == "100%"


def test_the_api_docs_render_without_a_policy_violation(
    page: Any, live_server: Any, browser_env: None, db: Any
) -> None:
    from playwright.sync_api import expect

    base = live_server.url
    watcher = Watcher(page)
    # The Swagger UI: its page, its init script and the schema; then an operation opened.
    assert_policy_headers("/api/docs/", watcher.visit(f"{base}/api/docs/"))
    assert not watcher.problems, "\n".join(watcher.problems)
    operations = page.locator(".opblock-summary")
    expect(operations.first).to_be_visible(timeout=15_000)
    operations.first.click()
    expect(page.locator(".opblock-body").first).to_be_visible()
    watcher.collect("/api/docs/ (an operation opened)")
    assert not watcher.problems, "\n".join(watcher.problems)


def test_the_watcher_sees_inline_code_the_policy_refuses(
    page: Any, live_server: Any, browser_env: None, db: Any
) -> None:
    """Guards the guard: the app's own CSP header on a page with an inline script, an
    inline style and a style attribute added yields three violations, all recorded."""
    base = live_server.url

    def tamper(route: Any) -> None:
        response = route.fetch()
        body = response.text().replace(
            "</body>",
            '<script>document.title = "ran"</script><style>body{color:red}</style>'
            '<p style="color: red">x</p></body>',
        )
        route.fulfill(response=response, body=body)

    page.route(f"{base}/login/", tamper)
    watcher = Watcher(page)
    headers = watcher.visit(f"{base}/login/")
    assert_policy_headers("/login/", headers)
    assert page.title() != "ran"
    # Only what was injected into the page itself (its own lines), nothing of the app's.
    violations = [p for p in watcher.problems if f"inline at {base}/login/:" in p]
    directives = sorted(v.split(": ", 1)[1].split(" ", 1)[0] for v in violations)
    assert directives == ["script-src-elem", "style-src-attr", "style-src-elem"], violations
