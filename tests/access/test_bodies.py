"""Every API route that takes a body, driven from the access tables: hostile JSON (lone
UTF-16 surrogates included) and unknown keys are a 400 in the project's error format,
and nothing is written.

The routes come from ``tests/access/routes_*.py`` (which ``test_route_matrix`` keeps
complete against the URLconf), so a new write endpoint is covered without being named
here. Each request is made by an actor the table says succeeds, with the route's own
target, so that a 400 can only come from the body.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.apps import apps

from tests.access.matrix import ACTORS, Case, Route, case_url
from tests.access.test_route_matrix import ROUTES, _client, world  # noqa: F401 (fixture)

WRITES = ("POST", "PUT", "PATCH")

HOSTILE = {
    "deep arrays": "[" * 50_000,
    "deep objects": '{"a":' * 40_000,  # under the 256 KiB limit: a 400, not a 413
    "just over the bound": '{"a": ' + "[" * 64 + "]" * 64 + "}",
    "overflowing float": '{"hours": 1e999999, "workers": 1e999999}',
    "5000-digit integer": '{"hours": ' + "9" * 5000 + "}",
    "NaN": '{"hours": NaN}',
}


def _api_writes() -> list[tuple[str, str, Route, Case]]:
    return [
        (template, method, route, case)
        for template, route in sorted(ROUTES.items())
        if not route.session and not route.passthrough
        for method, case in sorted(route.methods.items())
        if method in WRITES
    ]


def _snapshot() -> dict[str, list[dict[str, Any]]]:
    """Every row of every table, to prove a refused request wrote nothing."""
    return {
        model._meta.label: list(model.objects.order_by("pk").values())
        for model in apps.get_models()
        if model._meta.managed and not model._meta.proxy
    }


def _prepare(w: Any, template: str, route: Route, case: Case) -> tuple[str, Any]:
    """The URL (its target created) and a client of an actor the table says succeeds."""
    url = case_url(w, template, route, case)
    actor = next(a for a in ACTORS if case.expect[a] < 300)
    return url, _client(w.actors[actor])


def _send(client: Any, method: str, url: str, body: str) -> Any:
    return client.generic(method, url, data=body, content_type="application/json")


def _with_surrogates(valid: Any) -> list[tuple[str, Any]]:
    """The valid body with a lone surrogate in each string value in turn, and as a key."""
    variants: list[tuple[str, Any]] = [("a key", {**valid, "\ud800": 1})]
    if isinstance(valid, dict):
        for key, value in valid.items():
            if isinstance(value, str):
                variants.append((f"the value of {key}", {**valid, key: value + "\ud800"}))
            elif isinstance(value, list) and value and isinstance(value[0], str):
                variants.append((f"an item of {key}", {**valid, key: ["\udfff", *value[1:]]}))
    return variants


# Each API route that takes a body, with its method, as the tests below take them.
EVERY_WRITE = pytest.mark.parametrize(
    ("template", "method", "route", "case"),
    [pytest.param(*write, id=f"{write[1]} {write[0]}") for write in _api_writes()],
)


def test_every_write_route_is_swept() -> None:
    # Guards the guard: login, a create, a PUT, a PATCH and a body-less action are here.
    swept = {(template, method) for template, method, _, _ in _api_writes()}
    assert {
        ("api/v1/auth/token/", "POST"),
        ("api/v1/tenants/{tenant_slug}/clusters/", "POST"),
        ("api/v1/tenants/{tenant_slug}/quotas/", "PUT"),
        ("api/v1/tenants/{slug}/", "PATCH"),
        ("api/v1/tenants/{tenant_slug}/clusters/{name}/suspend/", "POST"),
    } <= swept


@EVERY_WRITE
def test_hostile_json_is_400_and_writes_nothing(
    world: Any,  # noqa: F811
    template: str,
    method: str,
    route: Route,
    case: Case,
) -> None:
    url, client = _prepare(world, template, route, case)
    # The route's valid body with "\ud800" in it: valid JSON, but no Unicode text, which
    # reached PostgreSQL's driver (or was echoed back in an unknown-key error) as a 500.
    surrogates = _with_surrogates(case.body(world) if case.body else {})
    before = _snapshot()
    for name, body in [*HOSTILE.items(), *((n, json.dumps(b)) for n, b in surrogates)]:
        response = _send(client, method, url, body)
        assert response.status_code == 400, (name, response.status_code, response.content[:300])
        error = response.json()["error"]
        assert error["code"] == "parse_error", (name, error)
        assert error["message"].startswith("JSON parse error"), (name, error)
    assert _snapshot() == before


@EVERY_WRITE
def test_an_unknown_body_key_is_400_and_writes_nothing(
    world: Any,  # noqa: F811
    template: str,
    method: str,
    route: Route,
    case: Case,
) -> None:
    # A route with a body gets its valid body plus one key it does not know; a body-less
    # action (suspend, resume) gets a body at all. Neither may be silently ignored.
    url, client = _prepare(world, template, route, case)
    valid = case.body(world) if case.body else {}
    before = _snapshot()
    response = _send(client, method, url, json.dumps({**valid, "surprise": 1}))
    assert response.status_code == 400, response.content[:300]
    error = response.json()["error"]
    assert error["code"] == "invalid"
    assert error["fields"] == {"surprise": ["Unknown field."]}
    assert _snapshot() == before
