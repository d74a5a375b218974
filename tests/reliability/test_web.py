"""Web hardening, the parts no other test covers: ``check --deploy`` is clean for a
deployment as the image builds it, and no state-changing request made with a session
and without a CSRF token changes anything (``reliability/web.py`` runs these with the
security headers over the access matrix and the Chromium CSP walk).

The CSRF sweep takes every route of the access tables with a method other than GET,
as an actor the table says succeeds, signed in with a session in a client that enforces
CSRF as a browser's requests are checked: dashboard forms (form-encoded) and API routes
(JSON, which the API must not accept on the strength of a session cookie alone).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from django.test import Client

from tests.access.matrix import ACTORS, Case, Route, case_url
from tests.access.test_bodies import _snapshot
from tests.access.test_route_matrix import ROUTES, world  # noqa: F401 (fixture)
from tests.controlplane.test_static_manifest import collected, manage  # noqa: F401

STATE_CHANGING = ("POST", "PUT", "PATCH", "DELETE")
# Routes that prove who the caller is from the body, not from a cookie: a forged
# cross-site request would need the password, so a session adds nothing to it.
CREDENTIALS_IN_BODY = {"api/v1/auth/token/"}


def test_check_deploy_is_clean(collected: Path) -> None:  # noqa: F811
    # A deployment shares one Redis cache between its web processes (deploy/README.md);
    # without it the check rightly warns that lockouts are counted per process.
    cache = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
    result = manage(collected, "check", "--deploy", "--fail-level", "WARNING", CACHE_URL=cache)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout, result.stdout + result.stderr


def _state_changing() -> list[Any]:
    return [
        pytest.param(template, method, route, case, id=f"{method} {template}")
        for template, route in sorted(ROUTES.items())
        if not route.passthrough and template not in CREDENTIALS_IN_BODY
        for method, case in sorted(route.methods.items())
        if method in STATE_CHANGING
        and any(case.expect[a] < 400 for a in ACTORS if a != "anonymous")
    ]


@pytest.mark.parametrize(("template", "method", "route", "case"), _state_changing())
def test_a_state_changing_request_without_a_csrf_token_is_refused(
    world: Any,  # noqa: F811
    template: str,
    method: str,
    route: Route,
    case: Case,
) -> None:
    url = case_url(world, template, route, case)
    actor = next(a for a in ACTORS if a != "anonymous" and case.expect[a] < 400)
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(world.actors[actor])
    body = case.body(world) if case.body else {}
    before = _snapshot()
    if route.session:
        response = browser.generic(
            method, url, urlencode(body), content_type="application/x-www-form-urlencoded"
        )
    else:
        response = browser.generic(method, url, json.dumps(body), content_type="application/json")
    assert response.status_code in (401, 403), (response.status_code, response.content[:300])
    assert _snapshot() == before
