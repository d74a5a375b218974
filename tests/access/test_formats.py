"""Every API route under every ``?format=``: a proper document or a clean 406, never a 5xx.

YAML is offered where it is meant, on the endpoints that return manifests (a request's
and the dry-run's, for ``kubectl apply -f -``); anywhere else
``?format=yaml`` is a 406 naming the formats offered, decided before the view runs, so
a write asked for in YAML is refused whole rather than done and then failing to render.
``?format=api`` is the browsable API, offered only while ``DEBUG`` was on at start-up.
Routes and targets come from the access tables, like tests/access/test_bodies.py.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from rest_framework.renderers import BrowsableAPIRenderer
from rest_framework.settings import api_settings

from tests.access.matrix import Case, Route
from tests.access.test_bodies import WRITES, _prepare, _snapshot
from tests.access.test_route_matrix import ROUTES, world  # noqa: F401 (fixture)

MANIFESTS = "api/v1/tenants/{tenant_slug}/clusters/{name}/manifests/"
DRY_RUN = "api/v1/tenants/{tenant_slug}/clusters/dry-run/"
JOBS_DRY_RUN = "api/v1/tenants/{tenant_slug}/jobs/dry-run/"
SERVICES_DRY_RUN = "api/v1/tenants/{tenant_slug}/services/dry-run/"
BROWSABLE = BrowsableAPIRenderer in api_settings.DEFAULT_RENDERER_CLASSES


def _api(methods: tuple[str, ...]) -> list[Any]:
    return [
        pytest.param(template, method, route, case, id=f"{method} {template}")
        for template, route in sorted(ROUTES.items())
        if not route.session and not route.passthrough
        for method, case in sorted(route.methods.items())
        if method in methods
    ]


def _offered(template: str, fmt: str) -> bool:
    if fmt == "yaml":
        return template in (MANIFESTS, DRY_RUN, JOBS_DRY_RUN, SERVICES_DRY_RUN)
    return fmt == "json" or (fmt == "api" and BROWSABLE)


def _assert_refused(response: Any, fmt: str) -> None:
    assert response.status_code == 406, (fmt, response.status_code, response.content[:300])
    assert response["Content-Type"] == "application/json"
    error = response.json()["error"]
    assert error["code"] == "not_acceptable"
    assert f"does not offer the format '{fmt}'" in error["message"]
    assert "json" in error["message"]


@pytest.mark.parametrize(("template", "method", "route", "case"), _api(("GET",)))
def test_every_read_renders_or_refuses_each_format(
    world: Any,  # noqa: F811
    template: str,
    method: str,
    route: Route,
    case: Case,
) -> None:
    url, client = _prepare(world, template, route, case)
    plain = client.get(url)
    assert plain.status_code == 200
    for fmt in ("json", "yaml", "api", "xml"):
        response = client.get(url, {"format": fmt})
        if not _offered(template, fmt):
            _assert_refused(response, fmt)
            continue
        assert response.status_code == 200, (fmt, response.status_code, response.content[:300])
        if fmt == "json":
            assert response["Content-Type"] == "application/json"
        elif fmt == "yaml":
            assert response["Content-Type"] == "application/yaml; charset=utf-8"
            # One document per Kubernetes object, the same objects as the JSON.
            assert list(yaml.safe_load_all(response.content)) == plain.json()["manifests"]
        else:
            assert response["Content-Type"].startswith("text/html")


@pytest.mark.parametrize(("template", "method", "route", "case"), _api(WRITES))
def test_a_write_asked_for_in_yaml_is_refused_before_it_is_done_or_rendered(
    world: Any,  # noqa: F811
    template: str,
    method: str,
    route: Route,
    case: Case,
) -> None:
    url, client = _prepare(world, template, route, case)
    body = json.dumps(case.body(world) if case.body else {})
    before = _snapshot()
    response = client.generic(method, f"{url}?format=yaml", body, content_type="application/json")
    if _offered(template, "yaml"):  # the dry-run: it writes nothing either way
        assert response.status_code == 200, response.content[:300]
        plain = client.generic(method, url, body, content_type="application/json").json()
        assert list(yaml.safe_load_all(response.content)) == plain["manifests"]
    else:
        _assert_refused(response, "yaml")
    assert _snapshot() == before


def test_manifests_errors_read_as_yaml_too(world: Any) -> None:  # noqa: F811
    url, client = _prepare(world, MANIFESTS, ROUTES[MANIFESTS], ROUTES[MANIFESTS].methods["GET"])
    missing = url.replace("/bob-dev/", "/nobody-here/")
    response = client.get(missing, {"format": "yaml"})
    assert response.status_code == 404
    assert yaml.safe_load(response.content) == {
        "error": {"code": "not_found", "message": "Not found."}
    }
