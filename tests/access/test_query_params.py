"""Query parameters are input like any other: a value that cannot be used is a 400 naming
the parameter, never silently ignored and never a 500.

Every paginated list of the access tables is swept (so a new list is covered without
being named here); filters and the usage period are checked where they exist.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.access.matrix import Case, Route
from tests.access.test_bodies import _prepare
from tests.access.test_route_matrix import ROUTES, world  # noqa: F401 (fixture)


def _reads() -> list[Any]:
    return [
        pytest.param(template, route, route.methods["GET"], id=template)
        for template, route in sorted(ROUTES.items())
        if not route.session and not route.passthrough and "GET" in route.methods
    ]


def _refused(response: Any, parameter: str) -> None:
    assert response.status_code == 400, (parameter, response.status_code, response.content[:300])
    error = response.json()["error"]
    assert error["code"] == "invalid"
    assert parameter in error["fields"], error


@pytest.mark.parametrize(("template", "route", "case"), _reads())
def test_pagination_parameters_are_validated(
    world: Any,  # noqa: F811
    template: str,
    route: Route,
    case: Case,
) -> None:
    url, client = _prepare(world, template, route, case)
    body = client.get(url).json()
    if not (isinstance(body, dict) and "results" in body):
        return  # not a list
    # "180.0", "2.0" and fullwidth digits: the schema says integer, and DRF would take
    # them (the schema fuzzer found the first).
    for bad in ("true", "abc", "0", "-1", "501", "1.5", "180.0", "\uff11\uff12", "9" * 5000):
        _refused(client.get(url, {"page_size": bad}), "page_size")
    for bad in ("abc", "0", "-3", "last", "2.0", "9" * 5000):
        _refused(client.get(url, {"page": bad}), "page")
    assert client.get(url, {"page_size": "500"}).status_code == 200
    assert client.get(url, {"page": "1", "page_size": "1"}).status_code == 200
    past = client.get(url, {"page": "999"})
    assert past.status_code == 404
    assert past.json()["error"]["code"] == "not_found"
    # An ordering the list does not offer is refused too (where it offers any).
    ordered = client.get(url, {"ordering": "no_such_field"})
    assert ordered.status_code in (200, 400)
    if ordered.status_code == 400:
        _refused(ordered, "ordering")


def test_an_offered_ordering_still_orders(as_user: Any, root: Any, h100: Any, l4: Any) -> None:
    client = as_user(root)
    names = [f["name"] for f in client.get("/api/v1/flavors/?ordering=-name").json()["results"]]
    assert names == ["l4", "h100"]
    _refused(client.get("/api/v1/flavors/?ordering=name,price"), "ordering")


@pytest.mark.parametrize(
    ("url", "parameter"),
    [
        ("/api/v1/flavors/?sharing=maybe", "sharing"),
        ("/api/v1/users/?is_staff=perhaps", "is_staff"),
        ("/api/v1/tenants/acme/clusters/?state=bogus", "state"),
        ("/api/v1/audit/?since=2026-99-01", "since"),
        # Offsets PostgreSQL cannot store are converted to UTC; past year 9999 they fail.
        ("/api/v1/audit/?since=9999-12-31T23:59:59-23:00", "since"),
        ("/api/v1/tenants/acme/usage/?since=9999-12-31T23:59:59-23:00", "since"),
        # The default period is the 30 days before until, which starts before year 1.
        ("/api/v1/tenants/acme/usage/?until=0001-01-05T00:00:00Z", "until"),
        ("/api/v1/tenants/acme/usage/?since=2026-02-01T00:00:00Z&until=2026-01-01", "since"),
    ],
)
def test_a_filter_value_that_cannot_be_used_is_400(
    as_user: Any, root: Any, acme: Any, url: str, parameter: str
) -> None:
    _refused(as_user(root).get(url), parameter)


def test_a_date_time_with_any_offset_is_compared_in_utc(as_user: Any, root: Any) -> None:
    # -16:33 is a valid ISO 8601 offset that PostgreSQL refuses in a literal.
    response = as_user(root).get("/api/v1/audit/?until=2030-01-01T00:00:00-16:33")
    assert response.status_code == 200, response.content
