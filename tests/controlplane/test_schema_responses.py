"""Live API responses validate against the published schema, with a strict validator.

openapi-core reads ``/api/schema/`` as clients do and checks each response's status,
content type and body against it: for every API route of the access tables, each GET as
every actor that may read it, and each write (creates and dry-runs among them) as the
first actor allowed to make it. Cluster and job representations are also read with
their optional parts both null and set (``queue`` of a queued request, ``endpoints`` and
``activity`` of a ready cluster), since a nullable reference is where a schema that a
lenient validator accepts is refused by a strict one.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest
from openapi_core import OpenAPI
from openapi_core.testing import MockRequest, MockResponse
from rest_framework.test import APIClient

from tests.access.matrix import ACTORS, Case, Route, url_kwargs
from tests.access.routes_clusters import _bobs
from tests.access.routes_jobs import _bobs as _bobs_job
from tests.access.test_route_matrix import ROUTES, _client, world  # noqa: F401 (fixture)


@pytest.fixture
def spec(db: Any) -> OpenAPI:
    response = APIClient().get("/api/schema/", {"format": "json"})
    assert response.status_code == 200
    return OpenAPI.from_dict(json.loads(response.content))


def _validated(spec: OpenAPI, client: APIClient, method: str, url: str, body: Any = None) -> Any:
    """The response to ``method url``, after openapi-core has checked it (it raises)."""
    response = client.generic(
        method, url, data="" if body is None else json.dumps(body), content_type="application/json"
    )
    parts = urlsplit(url)
    request = MockRequest(
        "http://testserver",
        method.lower(),
        parts.path,
        args=dict(parse_qsl(parts.query)),
        data=None if body is None else json.dumps(body).encode(),
        content_type="application/json",
    )
    spec.validate_response(
        request,
        MockResponse(
            response.content,
            status_code=response.status_code,
            content_type=response.get("Content-Type", "application/json"),
        ),
    )
    return response


def _api_cases() -> list[Any]:
    return [
        pytest.param(template, method, id=f"{method} {template}")
        for template, route in sorted(ROUTES.items())
        if template.startswith("api/v1/") and not route.session and not route.passthrough
        for method in sorted(route.methods)
        if any(200 <= code < 300 for code in route.methods[method].expect.values())
    ]


@pytest.mark.parametrize(("template", "method"), _api_cases())
def test_every_success_response_matches_the_schema(
    world: Any,  # noqa: F811
    spec: OpenAPI,
    template: str,
    method: str,
) -> None:
    route: Route = ROUTES[template]
    case: Case = route.methods[method]
    allowed = [actor for actor in ACTORS if 200 <= case.expect[actor] < 300]
    # A read as everyone who may read; a write once (it changes what the next one sees).
    for actor in allowed if method == "GET" else allowed[:1]:
        url = "/" + template.format(**url_kwargs(world, route, case))
        body = case.body(world) if case.body else None
        response = _validated(spec, _client(world.actors[actor]), method, url, body)
        assert response.status_code == case.expect[actor], (actor, response.content[:300])


def test_clusters_and_jobs_match_the_schema_with_their_parts_null_and_set(
    world: Any,  # noqa: F811
    spec: OpenAPI,
) -> None:
    ready = _bobs("ready", "bob-dev")(world)["name"]
    queued = _bobs("queued", "bob-waits")(world)["name"]
    job = _bobs_job("bob-job")(world)["name"]
    bob = _client(world.actors["engineer"])
    root = _client(world.actors["platform"])
    base = "/api/v1/tenants/acme/"

    listed = _validated(spec, bob, "GET", base + "clusters/").json()["results"]
    clusters = {item["name"]: item for item in listed}
    for name in (ready, queued):
        clusters[name] = _validated(spec, bob, "GET", f"{base}clusters/{name}/").json()
    jobs = [
        *_validated(spec, bob, "GET", base + "jobs/").json()["results"],
        _validated(spec, bob, "GET", f"{base}jobs/{job}/").json(),
    ]
    _validated(spec, bob, "GET", base + "queue/")
    _validated(spec, root, "GET", "/api/v1/queue/")

    # The data the schema was checked on has each nullable part both ways.
    assert clusters[ready]["queue"] is None
    assert clusters[ready]["endpoints"] is not None
    assert clusters[ready]["activity"] is not None
    assert clusters[queued]["queue"] is not None
    assert clusters[queued]["endpoints"] is None
    assert clusters[queued]["activity"] is None
    assert all(found["queue"] is not None for found in jobs)
    assert all(found["endpoints"] is None for found in jobs)
