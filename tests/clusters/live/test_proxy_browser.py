"""In a real browser: an engineer opens their cluster's Ray dashboard from its page and
lands on the dashboards' own origin (``RAY_PROXY_ORIGIN``), signed in once through a grant;
there they submit a job through the proxied Jobs API from the dashboard's origin (as Ray's
UI does). A script the cluster's head serves can neither read the product's cookies nor
use the user's session on the product; without the origin, the browser runs none of it.

The live server answers both origins: the product as ``localhost``, the Ray origin as
``127.0.0.1`` on the same port (cookies are per host, never shared between the two).
kubesim's stub dashboard is made hostile by the tests (:func:`hostile_head`), not by a
route of its own.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

import tests.frontend.browser  # noqa: F401  (sets DJANGO_ALLOW_ASYNC_UNSAFE first)
from tests.frontend.test_browser import sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SUBMIT = """async () => {
  const answer = await fetch("api/jobs/", {
    method: "POST",
    headers: {"Content-Type": "application/json"},
    body: JSON.stringify({entrypoint: "python train.py",
                          metadata: {"kubesim.io/job-run-seconds": "60"}}),
  });
  return [answer.status, await answer.json()];
}"""

HOSTILE_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Ray Dashboard</title></head>
<body><h1>Ray Dashboard</h1><pre id="result">script did not run</pre>
<script src="static/hostile.js"></script></body></html>
"""
# What a cluster's head could try against whoever looks at its dashboard: read the
# product's cookies, read the product's API with the user's session, change something
# there (a cross-site POST needs no CORS to be sent), reach another cluster's dashboard
# on the same origin, and tell the opener's window what to do.
HOSTILE_SCRIPT = """
const out = {ran: true, cookie: document.cookie, opener: window.opener === null};
document.getElementById("result").textContent = JSON.stringify(out);
(async () => {
  const product = "%(product)s";
  try {
    const answer = await fetch(product + "/api/v1/tenants/", {credentials: "include"});
    out.read = answer.status + " " + (await answer.text()).slice(0, 100);
  } catch (e) { out.read = "blocked"; }
  try {
    await fetch(product + "/api/v1/tenants/acme/clusters/bob-live/suspend/", {
      method: "POST", mode: "no-cors", credentials: "include",
      headers: {"Content-Type": "text/plain"}, body: "{}",
    });
    out.post = "sent";
  } catch (e) { out.post = "blocked"; }
  try {
    const other = await fetch("/c/acme/bob-other/api/jobs/", {credentials: "include"});
    out.other = other.status + " " + (await other.text()).slice(0, 100);
  } catch (e) { out.other = "blocked"; }
  const own = await fetch("api/version?from=hostile");
  out.own = own.status;
  out.done = true;
  document.getElementById("result").textContent = JSON.stringify(out);
})();
"""


@pytest.fixture
def hostile_head(monkeypatch: Any, live_server: Any) -> None:
    """kubesim's dashboard serves a page whose script attacks the product."""
    from kubesim.operators.raydashboard import HTML, Dashboard, Reply

    original = Dashboard.serve
    script = HOSTILE_SCRIPT % {"product": live_server.url}

    def serve(
        self: Dashboard, method: str, path: str, body: bytes, *, upgrade: bool = False
    ) -> Reply:
        if path == "/":
            return Reply(200, HTML, HOSTILE_PAGE.encode())
        if path == "/static/hostile.js":
            return Reply(200, "text/javascript; charset=utf-8", script.encode())
        return original(self, method, path, body, upgrade=upgrade)

    monkeypatch.setattr(Dashboard, "serve", serve)


@pytest.fixture
def ray_origin(settings: Any, live_server: Any) -> Iterator[str]:
    """The Ray origin on the live server's port, under another host name."""
    origin = live_server.url.replace("localhost", "127.0.0.1")
    assert origin != live_server.url
    settings.RAY_PROXY_ORIGIN = origin
    settings.PUBLIC_BASE_URL = live_server.url
    yield origin


@pytest.fixture
def bob_signed_in(page: Any, live_server: Any, browser_env: None, live_cluster: Any) -> Any:
    """bob's browser, signed in to the product, his live cluster ready."""
    sign_in(page, live_server.url, "bob")
    return page


def _open_dashboard(page: Any, base: str) -> Any:
    """Click the cluster page's link; the dashboard's window, loaded."""
    from playwright.sync_api import expect

    page.goto(f"{base}/t/acme/clusters/bob-live/")
    link = page.get_by_role("link", name="Open the Ray dashboard")
    expect(link).to_have_attribute("href", f"{base}/t/acme/clusters/bob-live/ray/")
    with page.expect_popup() as opened:
        link.click()
    dashboard = opened.value
    dashboard.wait_for_load_state()
    return dashboard


def test_open_the_ray_dashboard_on_its_origin_and_submit_a_job(
    bob_signed_in: Any, live_server: Any, kubesim: Any, ray_origin: str
) -> None:
    from playwright.sync_api import expect

    page = bob_signed_in
    dashboard = _open_dashboard(page, live_server.url)
    assert dashboard.url == f"{ray_origin}/c/acme/bob-live/"
    expect(dashboard.get_by_role("heading", name="Ray Dashboard")).to_be_visible()
    expect(dashboard.locator("body")).to_contain_text("bob-live")

    status, body = dashboard.evaluate(SUBMIT)
    assert status == 200, body
    dashboard.reload()
    expect(dashboard.locator("table")).to_contain_text(body["submission_id"])
    expect(dashboard.locator("table")).to_contain_text("python train.py")

    seen = kubesim.proxy_requests()
    assert [r["method"] for r in seen].count("POST") == 1
    assert all(not r["cookies"] for r in seen)
    # The product's cookies stay the product host's; the dashboard's is its own.
    names = {(c["domain"], c["name"]) for c in page.context.cookies()}
    assert ("127.0.0.1", "sessionid") not in names
    assert ("127.0.0.1", "gangway_ray") in names


def test_a_script_from_the_cluster_gets_nothing_of_the_product(
    bob_signed_in: Any,
    live_server: Any,
    live_cluster: Any,
    kubesim: Any,
    ray_origin: str,
    hostile_head: None,
) -> None:
    from playwright.sync_api import expect

    dashboard = _open_dashboard(bob_signed_in, live_server.url)
    assert dashboard.url.startswith(ray_origin)
    result = dashboard.locator("#result")
    expect(result).to_contain_text('"done":true')
    out = json.loads(result.inner_text())
    assert out["cookie"] == ""  # the dashboard's cookie is HttpOnly; the product's elsewhere
    assert out["opener"] is True
    assert out["read"] == "blocked"  # no CORS: the product's answer is not readable
    assert out["other"] == "blocked"  # another cluster: back to the product, cross-origin
    assert out["own"] == 200  # its own dashboard works
    live_cluster.refresh_from_db()
    assert live_cluster.state == "ready"  # the cross-site POST changed nothing
    assert "from=hostile" in json.dumps(kubesim.proxy_requests())


def test_without_an_origin_the_cluster_s_script_does_not_run(
    bob_signed_in: Any, live_server: Any, live_cluster: Any, kubesim: Any, hostile_head: None
) -> None:
    from playwright.sync_api import expect

    dashboard = _open_dashboard(bob_signed_in, live_server.url)
    assert dashboard.url == f"{live_server.url}/t/acme/clusters/bob-live/ray/"
    expect(dashboard.get_by_role("heading", name="Ray Dashboard")).to_be_visible()
    # A script without async or defer runs before the load event: by now it would have.
    dashboard.wait_for_load_state("load")
    expect(dashboard.locator("#result")).to_have_text("script did not run")
    assert "from=hostile" not in json.dumps(kubesim.proxy_requests())
    live_cluster.refresh_from_db()
    assert live_cluster.state == "ready"


def test_a_stale_link_and_a_lost_membership_open_nothing(
    page: Any,
    live_server: Any,
    browser_env: None,
    live_cluster: Any,
    kubesim: Any,
    ray_origin: str,
    monkeypatch: Any,
    vera: Any,
) -> None:
    from django.core import signing
    from playwright.sync_api import expect

    from tenants.models import Membership

    sign_in(page, live_server.url, "vera")
    # The grant link is held back (as a link would sit in a history or a log) ...
    links: list[str] = []
    product_route = f"{live_server.url}/t/acme/clusters/bob-live/ray/"

    def hold(route: Any) -> None:
        answer = route.fetch(max_redirects=0)
        links.append(answer.headers["location"])
        route.fulfill(status=200, content_type="text/plain", body="held")

    page.context.route(product_route, hold)
    page.goto(f"{live_server.url}/t/acme/clusters/bob-live/")
    with page.expect_popup() as opened:
        page.get_by_role("link", name="Open the Ray dashboard").click()
    stale = opened.value
    expect(stale.locator("body")).to_have_text("held")
    page.context.unroute(product_route)
    assert len(links) == 1
    # ... and opened after its few minutes.
    later = time.time() + 121
    with monkeypatch.context() as clock:
        clock.setattr(signing.time, "time", lambda: later)
        stale.goto(links[0])
        expect(stale.get_by_role("heading", name="This link has expired")).to_be_visible()
    stale.close()

    dashboard = _open_dashboard(page, live_server.url)
    expect(dashboard.get_by_role("heading", name="Ray Dashboard")).to_be_visible()
    Membership.objects.filter(user=vera).delete()
    dashboard.reload()
    assert dashboard.url.startswith(live_server.url)  # sent back to the product: a 404
    expect(dashboard.get_by_role("heading", name="Ray Dashboard")).to_have_count(0)
