"""Malformed credentials on every route: treated like no credentials, never a 500.

A token or session cookie is client input that used to reach a database query as is;
PostgreSQL refuses a NUL byte, so ``Authorization: Token <NUL>...`` or a session cookie
holding one failed every request. Each route of the access tables must now answer
exactly what it answers an anonymous caller (or a 401 for a token it cannot use).
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

import pytest
from django.test import Client

from tests.access.matrix import Case, Route, case_url
from tests.access.test_route_matrix import ROUTES, world  # noqa: F401 (fixture)

TOKENS = ["Token abc\x00def", "Token " + "\x00" * 64, "Token caf\xe9", "Token " + "f" * 5000]
# A gangway token is read after ``Bearer`` too (tests/tenants/sso/test_bearer.py).
TOKENS += ["Bearer abc\x00def", "Bearer caf\xe9", "Bearer " + "f" * 5000]
# ``"...\\000..."`` is valid cookie syntax for a value holding a NUL byte.
COOKIES = ['"abcdefgh\\000ijkl"', "abcdefgh\x00ijkl", "ABCDEFGH-not-a-key"]


def _cases() -> list[Any]:
    return [
        pytest.param(template, method, route, case, id=f"{method} {template}")
        for template, route in sorted(ROUTES.items())
        for method, case in sorted(route.methods.items())
    ]


def _request(w: Any, template: str, method: str, route: Route, case: Case, **extra: Any) -> Any:
    url = case_url(w, template, route, case)
    body = case.body(w) if case.body else None
    client = Client()
    if "cookie" in extra:
        client.cookies["sessionid"] = extra.pop("cookie")
    if route.session:
        data = urlencode(body or {})
        content_type = "application/x-www-form-urlencoded"
    else:
        data = "" if body is None else json.dumps(body)
        content_type = "application/json"
    return client.generic(method, url, data=data, content_type=content_type, **extra)


@pytest.mark.parametrize(("template", "method", "route", "case"), _cases())
def test_malformed_credentials_are_no_credentials(
    world: Any,  # noqa: F811
    template: str,
    method: str,
    route: Route,
    case: Case,
) -> None:
    anonymous = case.expect["anonymous"]
    for cookie in COOKIES:
        response = _request(world, template, method, route, case, cookie=cookie)
        assert response.status_code == anonymous, (cookie, response.content[:200])
    if route.session:
        return
    for token in TOKENS:
        response = _request(world, template, method, route, case, HTTP_AUTHORIZATION=token)
        # A route open to anonymous callers (logging in) does not read the header at all.
        assert response.status_code == anonymous, (token[:20], response.content[:200])
        if anonymous == 401:
            assert response.json()["error"]["code"] == "authentication_failed"
