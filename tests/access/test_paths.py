"""Every API route with a path parameter, given one that cannot name anything: a 404 in
the API's error format, never a 500 from the database and never Django's HTML page.

PostgreSQL refuses a NUL byte in a query parameter, so before the converters admitted
only what an identifier can be, ``/api/v1/flavors/a%00b/`` reached a query and failed.
Routes and targets come from the access tables, like tests/access/test_bodies.py.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client

from tests.access.matrix import Route
from tests.access.test_route_matrix import ROUTES, _client, world  # noqa: F401 (fixture)

HOSTILE = ["a%00b", "%00", "%C3%A9%F0%9F%92%A5", "UPPER_and.dots", "-" * 300]


def _parameterised() -> list[Any]:
    return [
        pytest.param(template, route, id=template)
        for template, route in sorted(ROUTES.items())
        if not route.session and "{" in template
    ]


@pytest.mark.parametrize(("template", "route"), _parameterised())
def test_a_path_parameter_naming_nothing_is_a_json_404(
    world: Any,  # noqa: F811
    template: str,
    route: Route,
) -> None:
    client = _client(world.actors["platform"])
    names = re.findall(r"{(\w+)}", template)
    # ``path`` is the Ray dashboard proxy's: what follows the cluster's name is the
    # dashboard's to resolve, so only the parameters before it must name something.
    valid = {
        "tenant_slug": "acme",
        "slug": "acme",
        "name": "h100",
        "username": "bob",
        "webhook_id": "1",
        "token_id": "1",
        "path": "",
    }
    for method in route.methods:
        for name in (n for n in names if n != "path"):
            for value in HOSTILE:
                url = "/" + template.format(**{**valid, name: value})
                response = client.generic(method, url, "{}", content_type="application/json")
                assert response.status_code == 404, (method, url, response.content[:200])
                assert response.json() == {"error": {"code": "not_found", "message": "Not found."}}


def test_an_unknown_api_url_is_a_json_404_and_a_page_is_html(db: Any) -> None:
    response = Client().get("/api/v1/no-such-thing/")
    assert response.status_code == 404
    assert response.json() == {"error": {"code": "not_found", "message": "Not found."}}
    page = Client().get("/no-such-page/")
    assert page.status_code == 404
    assert page["Content-Type"].startswith("text/html")
