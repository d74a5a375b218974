"""Every route, every method, every actor: the access matrix generated from the URLconf.

The route list comes from ``django.urls.get_resolver()``; the expectations from the
``routes_*.py`` tables. A route (or a method of a route) that no table declares fails
``test_every_route_is_declared`` by name, so a new endpoint cannot ship without its
access rules. Requests authenticate with real knox tokens, the way clients do.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
import re
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from urllib.parse import urlencode

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from knox.models import AuthToken
from rest_framework.test import APIClient

from tests.access.matrix import ACTORS, Case, Route, url_kwargs
from tests.controlplane.test_security_headers import assert_security_headers
from tests.factories import GpuFlavorFactory, UserFactory

_HERE = Path(__file__).parent


def _tables() -> tuple[dict[str, Route], dict[str, int], dict[str, str]]:
    routes: dict[str, Route] = {}
    public: dict[str, int] = {}
    exempt: dict[str, str] = {}
    for info in pkgutil.iter_modules([str(_HERE)]):
        if not info.name.startswith("routes_"):
            continue
        module = importlib.import_module(f"tests.access.{info.name}")
        for name, target in (("ROUTES", routes), ("PUBLIC", public), ("EXEMPT", exempt)):
            table = getattr(module, name, {})
            clash = set(table) & set(target)
            assert not clash, f"{info.name}.{name} redeclares {sorted(clash)}"
            target.update(table)
    return routes, public, exempt


ROUTES, PUBLIC, EXEMPT = _tables()
_CONVERTER = re.compile(r"<(?:\w+:)?(\w+)>|\(\?P<(\w+)>[^)]*\)")


def _named_groups(route: str) -> str:
    """Replace each regex group ``(?P<name>...)`` by ``{name}``, nested parentheses too."""
    out, i = [], 0
    while (start := route.find("(?P<", i)) != -1:
        name_end = route.index(">", start)
        depth, j = 0, start
        while True:
            if route[j] == "(" and route[j - 1 : j] != "\\":
                depth += 1
            elif route[j] == ")" and route[j - 1 : j] != "\\":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        out.append(route[i:start] + "{" + route[start + 4 : name_end] + "}")
        i = j + 1
    return "".join(out) + route[i:]


def _template(route: str) -> str:
    route = _CONVERTER.sub(lambda m: "{" + (m.group(1) or m.group(2)) + "}", _named_groups(route))
    return route.replace("^", "").replace("$", "").replace("\\Z", "")


def _walk(resolver: URLResolver, prefix: str = "") -> Iterator[tuple[str, URLPattern]]:
    for item in resolver.url_patterns:
        if isinstance(item, URLResolver):
            yield from _walk(item, prefix + str(item.pattern))
        else:
            yield _template(prefix + str(item.pattern)), item


def _methods(pattern: URLPattern) -> set[str]:
    callback: Any = pattern.callback
    if getattr(callback, "actions", None):
        return {m.upper() for m in callback.actions if m not in ("head", "options")}
    cls = getattr(callback, "cls", None) or getattr(callback, "view_class", None)
    if cls is not None:
        return {m.upper() for m in ("get", "post", "put", "patch", "delete") if hasattr(cls, m)}
    return set()


def _exempt(template: str) -> bool:
    return any(
        template == key or (key.endswith("/") and template.startswith(key)) for key in EXEMPT
    )


def test_every_route_is_declared() -> None:
    seen: set[str] = set()
    problems: list[str] = []
    for template, pattern in _walk(get_resolver()):
        if _exempt(template) or template in PUBLIC:
            seen.add(template)
            continue
        seen.add(template)
        route = ROUTES.get(template)
        if route is None:
            problems.append(f"route {template!r} has no entry in tests/access/routes_*.py")
            continue
        declared, served = set(route.methods), _methods(pattern)
        # A plain function view does not say which methods it serves: then the table's
        # own list stands, but it may not be empty.
        if (served or not declared) and declared != served:
            problems.append(
                f"route {template!r} serves {sorted(served)} but the table declares "
                f"{sorted(declared)}"
            )
    stale = sorted((set(ROUTES) | set(PUBLIC)) - seen)
    problems += [f"table entry {template!r} matches no route" for template in stale]
    assert not problems, "\n".join(problems)


def test_the_walk_sees_the_api() -> None:
    # Guards the guard: if the walk found nothing, the test above would pass vacuously.
    templates = {template for template, _ in _walk(get_resolver())}
    assert "api/v1/tenants/{tenant_slug}/members/{username}/" in templates
    assert _methods(dict(_walk(get_resolver()))["api/v1/flavors/{name}/"]) == {
        "GET",
        "PATCH",
        "DELETE",
    }


@pytest.fixture
def world(
    db: Any, acme: Any, globex: Any, alice: Any, bob: Any, vera: Any, charlie: Any, root: Any
) -> SimpleNamespace:
    """acme with alice/bob/vera, globex with charlie, root; a user without tenants (dave)
    and a flavor nobody references (spare), so that every case has a valid target."""
    UserFactory(username="dave")
    GpuFlavorFactory(name="spare", gpu_product="NVIDIA-A100", node_count=1)
    return SimpleNamespace(
        acme=acme,
        globex=globex,
        password="correct-horse-battery",
        actors={
            "anonymous": None,
            "outsider": charlie,
            "viewer": vera,
            "engineer": bob,
            "admin": alice,
            "platform": root,
        },
    )


def _client(user: Any) -> APIClient:
    client = APIClient()
    if user is not None:
        _, key = AuthToken.objects.create(user=user)
        client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


_CASES = [
    pytest.param(template, method, actor, id=f"{template} {method} {actor}")
    for template, route in sorted(ROUTES.items())
    for method in sorted(route.methods)
    for actor in ACTORS
]


@pytest.mark.parametrize(("template", "method", "actor"), _CASES)
def test_route_access(world: SimpleNamespace, template: str, method: str, actor: str) -> None:
    route = ROUTES[template]
    case: Case = route.methods[method]
    kwargs = url_kwargs(world, route, case)
    url = "/" + template.format(**kwargs)
    body = case.body(world) if case.body else None
    expected = case.expect[actor]
    if route.session:
        browser = Client()
        if world.actors[actor] is not None:
            browser.force_login(world.actors[actor])
        response = browser.generic(
            method,
            url,
            data=urlencode(body or {}),
            content_type="application/x-www-form-urlencoded",
        )
        assert response.status_code == expected, (
            f"{method} {url} as {actor}: {response.status_code} {response.content[:300]!r}"
        )
        # The dashboard's Ray proxy serves Ray's pages, which style inline.
        assert_security_headers(response, inline_styles="/ray/" in template)
        if actor == "anonymous":
            assert response["Location"].startswith("/login/")
        elif expected == 302:  # a form that worked goes to the page of what it changed
            if template.startswith("notifications/"):
                assert response["Location"] == "/notifications/"
            elif template.startswith("account/ssh-keys/"):
                assert response["Location"] == "/account/ssh-keys/"
            elif template.startswith("t/{slug}/webhooks/"):
                assert response["Location"] == f"/t/{kwargs['slug']}/webhooks/"
            elif template.startswith("platform/"):
                assert response["Location"].startswith("/platform/")
            elif template.startswith("t/{slug}/members/"):
                assert response["Location"] == f"/t/{kwargs['slug']}/members/"
            elif template.startswith("t/{slug}/usage/"):  # a cost cap: back to the report
                assert response["Location"] == f"/t/{kwargs['slug']}/usage/report/"
            elif "/manage/" in template:  # a queue control: back to the queue
                assert response["Location"] == f"/t/{kwargs['slug']}/queue/"
            else:  # the page of the cluster (or job, or service)
                section = template.split("/")[2]
                kind = section if section in ("jobs", "services") else "clusters"
                assert response["Location"].startswith(f"/t/{kwargs['slug']}/{kind}/")
        return
    client = _client(world.actors[actor])
    response = client.generic(
        method,
        url,
        # No body is an empty one (``None`` would be sent as the four bytes "None").
        data="" if body is None else json.dumps(body),
        content_type="application/json",
    )
    assert response.status_code == expected, (
        f"{method} {url} as {actor}: {response.status_code} {response.content[:300]!r}"
    )
    assert_security_headers(response)
    if expected == 401:
        assert response["WWW-Authenticate"] == "Token"
    if expected in (401, 403, 404):
        error = response.json()["error"]
        assert error["code"] in {"not_authenticated", "permission_denied", "not_found"}
    if actor == "outsider" and expected == 404:
        # Never the object: the body is the generic not-found error, nothing more.
        assert response.json() == {"error": {"code": "not_found", "message": "Not found."}}


@pytest.mark.parametrize(("template", "expected"), sorted(PUBLIC.items()))
def test_public_route(db: Any, template: str, expected: int) -> None:
    response = APIClient().get("/" + template)
    assert response.status_code == expected
    assert_security_headers(response)
