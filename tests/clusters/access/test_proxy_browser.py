"""An engineer opens their cluster's Ray dashboard from its page in a real browser, and
submits a job through the proxied Jobs API from the dashboard's own origin (as Ray's UI
and scripts on it do): signed in once, no token, no port-forward, and none of the
product's cookies reach the cluster."""

from __future__ import annotations

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


def test_open_the_ray_dashboard_and_submit_a_job_through_the_proxy(
    page: Any, live_server: Any, browser_env: None, live_cluster: Any, kubesim: Any
) -> None:
    from playwright.sync_api import expect

    base = live_server.url
    sign_in(page, base, "bob")
    page.goto(f"{base}/t/acme/clusters/bob-live/")
    link = page.get_by_role("link", name="Open the Ray dashboard")
    expect(link).to_have_attribute("href", f"{base}/t/acme/clusters/bob-live/ray/")
    with page.expect_popup() as opened:
        link.click()
    dashboard = opened.value
    dashboard.wait_for_load_state()
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
