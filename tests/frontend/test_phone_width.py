"""On a phone (a 390 px wide viewport) no dashboard page is wider than the screen, and
nothing inside a card needs sideways scrolling or spills out of it.

The pages are every dashboard page (``tests/frontend/pages.py``), as the engineer and
as the platform admin, who between them open all of them; the cluster's page has its
history, the queue a waiting request and a job.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

import tests.frontend.browser  # noqa: F401  (sets DJANGO_ALLOW_ASYNC_UNSAFE first)
from tests.access import test_route_matrix
from tests.frontend.pages import walk_as

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

world = test_route_matrix.world  # the access matrix's actors and tenants

PHONE = {"width": 390, "height": 844}

# "<what>: <how far it spills>" for the page and for each card that is too wide.
TOO_WIDE = """
() => {
  const problems = [];
  const doc = document.documentElement;
  if (doc.scrollWidth > window.innerWidth) {
    problems.push(`the page is ${doc.scrollWidth} px wide`);
  }
  const name = (el) => `<${el.tagName.toLowerCase()} class="${el.className}"` +
    `${el.id ? ' id="' + el.id + '"' : ""}>`;
  for (const card of document.querySelectorAll(".card")) {
    const box = card.getBoundingClientRect();
    if (card.scrollWidth > card.clientWidth + 1) {
      problems.push(`${name(card)} scrolls sideways (${card.scrollWidth} in ${card.clientWidth})`);
      continue;
    }
    for (const el of card.querySelectorAll("*")) {
      // Inside a box that clips or scrolls its own content (a YAML listing, text for
      // screen readers only), the box is what is measured, not what it holds.
      let contained = false;
      for (let a = el.parentElement; a && a !== card; a = a.parentElement) {
        if (getComputedStyle(a).overflowX !== "visible") contained = true;
      }
      if (contained) continue;
      const r = el.getBoundingClientRect();
      if (r.width > 0 && (r.right > box.right + 1 || r.left < box.left - 1)) {
        problems.push(`${name(el)} spills out of ${name(card)} (${r.left}-${r.right} px)`);
        break;
      }
    }
  }
  return problems;
}
"""


@pytest.mark.parametrize("role", ["engineer", "platform"])
def test_no_page_is_wider_than_a_phone(
    browser: Any,
    live_server: Any,
    browser_env: None,
    world: SimpleNamespace,
    request_cluster: Any,
    role: str,
) -> None:
    walk = walk_as(
        browser, live_server, world, request_cluster, role, viewport=PHONE, is_mobile=True
    )
    # The pages the issue names, so that the walk cannot silently lose them.
    for wanted in (
        "/t/acme/",
        "/t/acme/clusters/bob-dev/",
        "/t/acme/clusters/new/",
        "/t/acme/jobs/",
        "/t/acme/jobs/bob-job/",
        "/t/acme/queue/",
    ):
        assert wanted in walk.paths, wanted
    problems: list[str] = []
    for path in walk.visit():
        problems += [f"{path} as {role}: {p}" for p in walk.page.evaluate(TOO_WIDE)]
    walk.context.close()
    assert not problems, "\n".join(problems)
