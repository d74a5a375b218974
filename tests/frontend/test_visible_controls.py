"""Every form control, button and link a dashboard page renders has a box a person can
see, on every page, as every role; every destructive button asks first; and every link
leads somewhere that role may go.

A control counts as unseen when it has no size, when an ancestor clips it (an
``overflow`` other than ``visible``/``auto``/``scroll`` with the control outside its
box), when it or an ancestor is ``display: none``, ``visibility: hidden`` or fully
transparent, or when it lies outside the document. The one exception, narrow and on
purpose: controls inside a closed ``<details>`` or ``<dialog>`` (their ``<summary>`` is
checked), fields that matter only for one choice of another field (``data-shown-when``:
the walk makes that choice and checks them again) and the skip link, which shows on
keyboard focus (checked here too), are hidden until a person asks for them.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

import tests.frontend.browser  # noqa: F401  (sets DJANGO_ALLOW_ASYNC_UNSAFE first)
from tests.access import test_route_matrix
from tests.frontend.pages import ROLES, walk_as

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

world = test_route_matrix.world  # the access matrix's actors and tenants

CONTROLS = "a[href], button, input:not([type=hidden]), select, textarea, summary"

# Returns "<control>: <why it cannot be seen>" for each control of the page.
UNSEEN = """
(selector) => {
  const describe = (el) => {
    const text = (el.innerText || el.value || el.getAttribute("aria-label") || "").trim();
    return `<${el.tagName.toLowerCase()}${el.id ? "#" + el.id : ""}` +
      `${el.name ? " name=" + el.name : ""}> ${JSON.stringify(text.slice(0, 40))}`;
  };
  // Hidden until asked for: a closed <details>' body, a closed <dialog>.
  const waitsForAsking = (el) => {
    const details = el.closest("details:not([open])");
    if (details && !(el.closest("summary") && el.closest("summary").parentElement === details)) {
      return true;
    }
    if (el.closest("[data-shown-when][hidden]")) return true;
    return Boolean(el.closest("dialog:not([open])"));
  };
  const why = (el) => {
    const box = el.getBoundingClientRect();
    if (box.width < 1 || box.height < 1) return "has no size";
    for (let a = el; a; a = a.parentElement) {
      const style = getComputedStyle(a);
      const tag = a.tagName.toLowerCase();
      const who = a === el ? "it" : `an ancestor <${tag} class="${a.className}">`;
      if (style.display === "none") return `${who} is display:none`;
      if (style.visibility !== "visible") return `${who} is visibility:${style.visibility}`;
      if (Number(style.opacity) === 0) return `${who} is transparent`;
      if (a === el) continue;
      const clips = (overflow) => overflow === "hidden" || overflow === "clip";
      const outer = a.getBoundingClientRect();
      if (clips(style.overflowX) && (box.left < outer.left - 1 || box.right > outer.right + 1)) {
        return `${who} clips it sideways (overflow-x: ${style.overflowX})`;
      }
      if (clips(style.overflowY) && (box.top < outer.top - 1 || box.bottom > outer.bottom + 1)) {
        return `${who} clips it (overflow-y: ${style.overflowY}, ${outer.height}px high)`;
      }
    }
    const doc = document.documentElement;
    const left = box.left + window.scrollX, top = box.top + window.scrollY;
    if (left + box.width <= 0 || top + box.height <= 0 || left >= doc.scrollWidth) {
      return "is off-screen";
    }
    return null;
  };
  const problems = [];
  for (const el of document.querySelectorAll(selector)) {
    if (el.matches("a.skip") || waitsForAsking(el)) continue;
    const reason = why(el);
    if (reason) problems.push(`${describe(el)}: ${reason}`);
  }
  return problems;
}
"""

# Forms whose button does something that cannot be taken back (it is styled ``danger``)
# and that do not ask first: gangway.js asks with the form's data-confirm.
UNASKED = """
() => [...document.querySelectorAll("form:not([data-confirm]) button.danger:not([disabled])")]
  .map((b) => `<form action=${b.form.getAttribute("action")}> "${b.innerText.trim()}"`)
"""

# Labels with an acronym in the wrong case ("gpus", "Ttl"), as Django writes a label
# from a field's name.
MISSPELT = """
() => [...document.querySelectorAll("label, legend, th")]
  .map((l) => l.textContent.replace(/\\s+/g, " ").trim())
  .filter((t) => {
    const rest = t.replace(/\\b(GPUs?|CPUs?|TTL|GiB|ID|URL|API)\\b/g, "");
    return /\\b(gpus?|cpus?|ttl|gib|id|url|api)\\b/i.test(rest);
  })
"""

# Makes each choice that shows hidden ``data-shown-when`` fields, as a person would pick
# it from the visible select or radio buttons; returns how many there were and those
# that stayed hidden.
REVEAL = """
() => {
  const fields = [...document.querySelectorAll("[data-shown-when][hidden]")];
  for (const field of fields) {
    const form = field.closest("form");
    const { shownWhen, shownValue } = field.dataset;
    // A select, or the radio button of that value.
    const other = form?.querySelector(
      `select[name="${shownWhen}"], input[name="${shownWhen}"][value="${shownValue}"]`
    );
    if (!other) continue;
    if (other.tagName === "SELECT") other.value = shownValue; else other.checked = true;
    other.dispatchEvent(new Event("change", { bubbles: true }));
  }
  return [fields.length, fields.filter((f) => f.hidden).map((f) => f.id)];
}
"""

LINKS = """
() => [...document.querySelectorAll("main a[href], header a[href]")]
  .map((a) => new URL(a.href))
  .filter((u) => u.origin === location.origin)
  .map((u) => u.pathname + u.search)
"""


@pytest.mark.parametrize("role", ROLES)
def test_every_control_on_every_page_can_be_seen(
    browser: Any,
    live_server: Any,
    browser_env: None,
    world: SimpleNamespace,
    request_cluster: Any,
    role: str,
) -> None:
    walk = walk_as(
        browser, live_server, world, request_cluster, role, viewport={"width": 1280, "height": 900}
    )
    assert "/platform/whatif/" in walk.paths or role != "platform"
    page, context, base = walk.page, walk.context, walk.base
    problems: list[str] = []
    links: set[str] = set()
    for path in walk.visit():
        problems += [f"{path} as {role}: {p}" for p in page.evaluate(UNSEEN, CONTROLS)]
        revealed, stuck = page.evaluate(REVEAL)
        problems += [f"{path} as {role}: {f} stays hidden after its choice" for f in stuck]
        if revealed:
            problems += [
                f"{path} as {role}, its choice made: {p}" for p in page.evaluate(UNSEEN, CONTROLS)
            ]
        problems += [f"{path} as {role}: {p} does not ask first" for p in page.evaluate(UNASKED)]
        problems += [
            f"{path} as {role}: {p!r} misspells an acronym" for p in page.evaluate(MISSPELT)
        ]
        links.update(page.evaluate(LINKS))
    # The skip link is the exception above because it shows on focus: it does.
    page.keyboard.press("Tab")
    skip = page.evaluate(
        "() => { const a = document.activeElement, b = a.getBoundingClientRect();"
        " return [a.className, b.width > 1 && b.height > 1 && b.top >= 0 && b.left >= 0]; }"
    )
    assert skip == ["skip", True], skip
    assert not problems, "\n".join(problems)

    # Every link the pages offer leads to a page this role may open (no 403 or 404: a
    # navigation link to a page that refuses its reader is a defect of the navigation).
    refused = []
    for link in sorted(links):
        if "/ray/" in link or link.startswith("/api/"):
            continue  # Ray's dashboard needs a live cluster; the API docs are public
        status = context.request.get(base + link, max_redirects=0).status
        if status >= 400:
            refused.append(f"{link}: {status}")
    assert not refused, f"links offered to {role} that refuse them:\n" + "\n".join(refused)
    context.close()
