"""The 500 page: styled, with the request id, and JSON in the API's error format under
/api/ — rendered without touching the database (which may be what failed)."""

from __future__ import annotations

import json

import pytest
from django.db import InterfaceError, OperationalError
from django.test import RequestFactory
from redis.exceptions import ConnectionError as RedisConnectionError

from controlplane.middleware import _request_id
from frontend.views.errors import server_error


@pytest.mark.parametrize(("path", "kind"), [("/t/acme/", "html"), ("/api/v1/queue/", "json")])
def test_a_server_error_says_so_with_the_request_id(path: str, kind: str) -> None:
    # No django_db mark: a database query here would raise, failing the test.
    token = _request_id.set("req-1234")
    try:
        response = server_error(RequestFactory().get(path))
    finally:
        _request_id.reset(token)
    assert response.status_code == 500
    reason = "Something went wrong on our side, and it was logged. Quote request id req-1234"
    if kind == "json":
        error = json.loads(response.content)["error"]
        assert error["code"] == "server_error" and error["message"].startswith(reason)
    else:
        html = response.content.decode()
        assert reason in html and 'data-status="500"' in html and "gangway.css" in html


DATABASE = (
    "database_unavailable",
    "The database is unavailable for a moment; nothing was changed.",
)
CACHE = (
    "cache_unavailable",
    "A service gangway depends on (its cache) is unavailable for a moment.",
)


# Sign-in counts failures in Redis: while it is away, sign-in says so (fails closed).
@pytest.mark.parametrize(
    ("error", "expected"),
    [(OperationalError, DATABASE), (InterfaceError, DATABASE), (RedisConnectionError, CACHE)],
)
@pytest.mark.parametrize(
    ("path", "kind"),
    [
        ("/t/acme/", "html"),
        ("/api/v1/queue/", "json"),
        ("/login/", "html"),
        ("/api/v1/auth/token/", "json"),
    ],
)
def test_an_outage_is_a_503_with_retry_after(
    error: type[Exception], expected: tuple[str, str], path: str, kind: str
) -> None:
    code, reason = expected
    # Django calls the handler inside its ``except`` block; so does this test.
    try:
        raise error("connection to 127.0.0.1 failed: Connection refused")
    except error:
        response = server_error(RequestFactory().post(path))
    assert response.status_code == 503 and response["Retry-After"] == "5"
    if kind == "json":
        error_json = json.loads(response.content)["error"]
        assert error_json["code"] == code
        assert error_json["message"].startswith(reason)
    else:
        html = response.content.decode()
        assert reason in html and 'data-status="503"' in html and "Back in a moment" in html
