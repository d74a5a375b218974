"""Session login for the browser, logout, and the placeholder home page."""

from __future__ import annotations

import re
from typing import Any

from django.test import Client


def test_login_then_home_lists_own_tenants(alice: Any, charlie: Any) -> None:
    client = Client()
    assert client.get("/").status_code == 302
    page = client.get("/login/")
    # No asset from a CDN (the CSRF token is random text: left out of the search).
    markup = re.sub(rb'value="[^"]*"', b"", page.content.lower())
    assert page.status_code == 200 and b"cdn" not in markup
    response = client.post("/login/", {"username": "alice", "password": "correct-horse-battery"})
    assert response.status_code == 302 and response["Location"] == "/"
    home = client.get("/").content.decode()
    assert "acme" in home and "globex" not in home
    # The session also authenticates the API (the browser's path).
    assert client.get("/api/v1/users/me/").json()["username"] == "alice"
    assert client.post("/logout/").status_code == 302
    assert client.get("/").status_code == 302


def test_api_docs_are_served_without_a_cdn(db: Any) -> None:
    page = Client().get("/api/docs/").content.decode()
    assert "cdn" not in page.lower() and "jsdelivr" not in page
    assert "/static/drf_spectacular_sidecar/" in page
