"""HEAD and OPTIONS on every route of the access tables, as every actor.

The tables declare the methods a route serves; the server also answers HEAD and OPTIONS
on each, and those answers must agree with the table (a 500 on ``OPTIONS`` once hid here):

- HEAD is GET without a body: the GET's status where the route has a GET; on the API
  elsewhere a 405 for whoever may use the route, the route's refusal (or a 405) for a
  caller it forbids, and its 401 or 404 for anyone else.
- OPTIONS on the API names the methods the caller may use (200), or refuses a caller
  whom every method refuses exactly as the route's first method does
  (controlplane/api/metadata.py). A dashboard page answers OPTIONS as its GET or with a
  405, and a form's target (no GET) with a 405 or what its POST would get.
- The Ray proxies answer HEAD as a GET; OPTIONS is on no role's allow-list of Ray's
  routes (clusters/live/ray_routes.py), so whoever may see the cluster gets a 403.
"""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest
from django.test import Client

from tests.access.matrix import ACTORS, Case, Route, url_kwargs
from tests.access.test_route_matrix import ROUTES, _client, world  # noqa: F401 (fixture)
from tests.controlplane.test_security_headers import assert_security_headers

# A refusal the table gives: not signed in, not allowed, or not visible.
_REFUSED = {401, 403, 404}
# The order in which DRF lists a view's methods (``allowed_methods``), which the first
# refusal follows.
_ORDER = ("GET", "POST", "PUT", "PATCH", "DELETE")


def _usable(route: Route, actor: str) -> list[str]:
    return sorted(m for m, case in route.methods.items() if case.expect[actor] not in _REFUSED)


def _first_refusal(route: Route, actor: str) -> int:
    method = next(m for m in _ORDER if m in route.methods)
    return route.methods[method].expect[actor]


def _expected(route: Route, method: str, actor: str) -> set[int]:
    """The statuses the table allows for HEAD or OPTIONS on the route as ``actor``."""
    get = route.methods.get("GET")
    if route.passthrough:
        assert get is not None
        return {get.expect[actor]}
    if route.session and actor == "anonymous":
        return {302}
    refused = _first_refusal(route, actor)
    if route.session:
        # Django's views answer HEAD as GET; a page or form that only serves its own
        # methods answers the rest with a 405, before or after its checks.
        if get is not None:
            return {get.expect[actor]} if method == "HEAD" else {get.expect[actor], 405}
        served = {405, 200} if _usable(route, actor) else {405}
        return served if _usable(route, actor) else served | {refused}
    if method == "HEAD":
        if get is not None:
            return {get.expect[actor]}
        if _usable(route, actor):
            return {405}
        # A caller known but not allowed (403) may learn that HEAD is not served here,
        # before or after the role check; a stranger only gets the route's refusal.
        return {refused, 405} if refused == 403 else {refused}
    return {200} if _usable(route, actor) else {refused}


def _target(w: SimpleNamespace, route: Route) -> tuple[Case, dict[str, str]]:
    """The case whose URL kwargs address the route (the GET's where there is one)."""
    case = route.methods.get("GET") or route.methods[sorted(route.methods)[0]]
    return case, url_kwargs(w, route, case)


_CASES = [
    pytest.param(template, method, actor, id=f"{template} {method} {actor}")
    for template, route in sorted(ROUTES.items())
    for method in ("HEAD", "OPTIONS")
    for actor in ACTORS
]


@pytest.mark.parametrize(("template", "method", "actor"), _CASES)
def test_head_and_options(
    world: SimpleNamespace,  # noqa: F811
    template: str,
    method: str,
    actor: str,
) -> None:
    route = ROUTES[template]
    _, kwargs = _target(world, route)
    url = "/" + template.format(**kwargs)
    user = world.actors[actor]
    client: Any
    if route.session:
        client = Client()
        if user is not None:
            client.force_login(user)
    else:
        client = _client(user)
    response = client.generic(method, url)
    expected = _expected(route, method, actor)
    if method == "OPTIONS" and "/ray/" in template:
        seen = route.methods["GET"].expect[actor]
        expected = {seen} if seen in _REFUSED | {302} else {403}
    assert response.status_code in expected, (
        f"{method} {url} as {actor}: {response.status_code} {response.content[:300]!r}"
    )
    assert_security_headers(response, inline_styles="/ray/" in template)
    if method == "HEAD":
        assert response.content == b""
    elif not route.session and not route.passthrough and response.status_code == 200:
        # A login route authenticates no one, so it answers every caller as anonymous.
        caller = "anonymous" if _usable(route, "anonymous") else actor
        assert json.loads(response.content)["methods"] == [
            m for m in _ORDER if m in _usable(route, caller)
        ]
