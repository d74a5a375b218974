"""Every response carries the Content-Security-Policy and the Permissions-Policy: pages,
JSON, errors, probes and the Swagger UI's init script alike (the browser test in
tests/frontend/test_csp.py shows the pages render under them)."""

from __future__ import annotations

from typing import Any

import pytest

PATHS = [
    "/healthz",
    "/metrics",  # a 403 here: no token is configured under test
    "/api/schema/",
    "/api/docs/",
    "/api/docs/?script=",
    "/api/v1/flavors/",  # a 401: anonymous
    "/api/v1/no-such-route/",  # a 404
    "/login/",
    "/admin/login/",
]


@pytest.mark.django_db
@pytest.mark.parametrize("path", PATHS)
def test_every_response_carries_the_policies(client: Any, path: str) -> None:
    response = client.get(path)
    assert response.status_code < 500
    assert_security_headers(response)


def assert_security_headers(response: Any, *, inline_styles: bool = False) -> None:
    """The policies every response carries (the access matrix checks each of its
    responses with this, so every route, method and actor is covered). The Ray
    dashboard's proxied pages (``inline_styles``) may style inline, as Ray's UI does
    (docs/access.md); inline script stays forbidden there too."""
    csp = response["Content-Security-Policy"]
    assert "default-src 'self'" in csp
    assert "frame-ancestors 'none'" in csp and "object-src 'none'" in csp
    assert "unsafe-eval" not in csp
    directives = [d.strip() for d in csp.split(";") if "unsafe-inline" in d]
    allowed = ["style-src"] if inline_styles else []
    assert [d.split()[0] for d in directives] in ([], allowed), csp
    permissions = response["Permissions-Policy"]
    assert "camera=()" in permissions and "microphone=()" in permissions


@pytest.mark.django_db
def test_the_api_docs_page_has_no_inline_script_or_style(client: Any) -> None:
    page = client.get("/api/docs/").content.decode()
    assert "<style" not in page
    assert "<script>" not in page
    assert 'src="/api/docs/?script="' in page
    script = client.get("/api/docs/?script=")
    assert script["Content-Type"].startswith("application/javascript")
    assert b"SwaggerUIBundle(" in script.content
