"""The 500 page: styled, with the request id, and JSON in the API's error format under
/api/ — rendered without touching the database (which may be what failed)."""

from __future__ import annotations

import json

import pytest
from django.test import RequestFactory

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
