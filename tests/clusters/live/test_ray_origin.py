"""The Ray dashboard on an origin of its own (``clusters/live/ray_origin.py``), over HTTP:
the product's route hands a signed-in user a grant, the Ray origin redeems it for a cookie
of its own and relays the dashboard; what it refuses, and what it never serves. Without
``RAY_PROXY_ORIGIN`` the dashboard is sandboxed on the product's origin. The browser's side
is ``test_ray_origin_browser.py``."""

from __future__ import annotations

import json
import time
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.test import Client
from knox.models import AuthToken

from clusters.live.ray_grants import SESSION_COOKIE
from clusters.live.ray_origin import ORIGIN_POLICY, cluster_label
from clusters.models import ClusterRequest
from tenants.models import Membership, Role

ORIGIN = "http://localhost:8181"
PRODUCT = "http://testserver"
PAGE = "/t/acme/clusters/bob-live/ray/"
DASH = "/c/acme/bob-live/"


@pytest.fixture
def ray_origin(settings: Any) -> str:
    settings.RAY_PROXY_ORIGIN = ORIGIN
    settings.PUBLIC_BASE_URL = PRODUCT
    return ORIGIN


def _body(response: Any) -> bytes:
    return b"".join(response.streaming_content) if response.streaming else response.content


def _signed_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _grant_link(user: Any, path: str = "") -> str:
    """The product's redirect for a signed-in ``user``: the grant link (path and query)."""
    answer = _signed_in(user).get(PAGE + path)
    assert answer.status_code == 302, answer
    link = urlsplit(answer["Location"])
    assert f"{link.scheme}://{link.netloc}" == ORIGIN
    return f"{link.path}?{link.query}"


def _ray_browser() -> Client:
    """A browser on the Ray origin: the product's cookies are another host's, never sent."""
    return Client(HTTP_HOST="localhost:8181")


def _opened(user: Any, path: str = "") -> Client:
    browser = _ray_browser()
    answer = browser.get(_grant_link(user, path))
    assert answer.status_code == 302, _body(answer)
    return browser


def test_the_product_redirects_with_a_grant_that_opens_the_dashboard_once(
    live_cluster: ClusterRequest, kubesim: Any, bob: Any, ray_origin: str
) -> None:
    link = _grant_link(bob, "api/jobs/?limit=5")
    assert _ray_browser().head(link).status_code == 404  # a preview does not use it up
    browser = _ray_browser()
    redeemed = browser.get(link)
    assert redeemed.status_code == 302
    assert redeemed["Location"] == DASH + "api/jobs/?limit=5"
    cookie = browser.cookies[SESSION_COOKIE]
    assert cookie["path"] == DASH
    assert cookie["httponly"] and cookie["samesite"] == "Lax"
    assert not cookie["secure"]  # http here; https origins get Secure
    assert kubesim.proxy_requests() == []  # nothing forwarded before the cookie is used

    page = browser.get(DASH)
    assert page.status_code == 200
    assert "bob-live" in _body(page).decode()
    assert page["Content-Security-Policy"] == ORIGIN_POLICY
    assert "sandbox" not in page["Content-Security-Policy"]
    (seen,) = kubesim.proxy_requests()
    assert not seen["cookies"] and cookie.value not in json.dumps(seen)

    again = _ray_browser().get(link)  # the same link, a second time
    assert again.status_code == 403
    assert "expired" in again.content.decode()


def test_an_expired_grant_opens_nothing(
    live_cluster: ClusterRequest, kubesim: Any, bob: Any, ray_origin: str, monkeypatch: Any
) -> None:
    from django.core import signing

    link = _grant_link(bob)
    later = time.time() + 121  # RAY_PROXY_GRANT_SECONDS is 120
    monkeypatch.setattr(signing.time, "time", lambda: later)
    answer = _ray_browser().get(link)
    assert answer.status_code == 403
    assert SESSION_COOKIE not in answer.cookies


def test_a_forged_or_mangled_grant_opens_nothing(
    live_cluster: ClusterRequest, bob: Any, ray_origin: str
) -> None:
    link = _grant_link(bob)
    assert _ray_browser().get(link[:-3] + "xyz").status_code == 403
    assert _ray_browser().get("/grant?g=").status_code == 403
    assert _ray_browser().get("/grant").status_code == 403


def test_a_session_for_one_cluster_does_not_open_another(
    live_cluster: ClusterRequest, kubesim: Any, bob: Any, request_cluster: Any, ray_origin: str
) -> None:
    from tests.frontend.conftest import make_ready

    make_ready(request_cluster(bob, name="bob-other"))
    browser = _opened(bob)
    value = browser.cookies[SESSION_COOKIE].value
    # The browser would not send the cookie outside its path; a client that does is
    # sent back to the product for a grant of that cluster.
    forged = _ray_browser()
    forged.cookies[SESSION_COOKIE] = value
    answer = forged.get("/c/acme/bob-other/api/jobs/")
    assert answer.status_code == 302
    assert answer["Location"] == PRODUCT + "/t/acme/clusters/bob-other/ray/api/jobs/"
    posted = forged.post("/c/acme/bob-other/api/jobs/", data="{}", content_type="application/json")
    assert posted.status_code == 401
    assert kubesim.proxy_requests() == []


def test_losing_access_ends_both_the_grant_and_the_session(
    live_cluster: ClusterRequest, kubesim: Any, vera: Any, ray_origin: str
) -> None:
    browser = _opened(vera)
    unused = _grant_link(vera)
    Membership.objects.filter(user=vera).delete()
    assert browser.get(DASH).status_code == 302  # back to the product, which says 404
    assert _signed_in(vera).get(PAGE).status_code == 404
    refused = _ray_browser().get(unused)
    assert refused.status_code == 403
    assert "no longer" in refused.content.decode()
    assert kubesim.proxy_requests() == []


def test_a_change_of_role_ends_the_session(
    live_cluster: ClusterRequest, kubesim: Any, vera: Any, ray_origin: str
) -> None:
    browser = _opened(vera)
    Membership.objects.filter(user=vera).update(role=Role.ADMIN)
    assert browser.get(DASH + "api/jobs/").status_code == 302  # for a grant with the new role
    assert kubesim.proxy_requests() == []


def test_the_grant_carries_the_role_to_the_allow_list(
    live_cluster: ClusterRequest, kubesim: Any, vera: Any, bob: Any, ray_origin: str
) -> None:
    viewer = _opened(vera)
    assert viewer.get(DASH + "api/jobs/").status_code == 200
    refused = viewer.get(DASH + "api/actors/kill?actor_id=ab")
    assert refused.status_code == 403
    assert "not allowed for a viewer of bob-live" in refused.json()["error"]["message"]
    owner = _opened(bob)

    def submit(site: str) -> Any:
        return owner.post(
            DASH + "api/jobs/",
            data=json.dumps({"entrypoint": "python x.py"}),
            content_type="application/json",
            HTTP_SEC_FETCH_SITE=site,
        )

    assert submit("same-site").status_code == 403  # the product is same-site, not same-origin
    same = submit("same-origin")
    assert same.status_code == 200, _body(same)
    assert [r["method"] for r in kubesim.proxy_requests()] == ["GET", "POST"]


def test_the_ray_origin_serves_nothing_of_the_product_and_ignores_its_session(
    live_cluster: ClusterRequest, kubesim: Any, bob: Any, ray_origin: str
) -> None:
    product = _signed_in(bob)
    session = product.cookies["sessionid"].value
    stranger = _ray_browser()
    stranger.cookies["sessionid"] = session  # as if a browser sent it
    for path in (
        "/",
        "/login/",
        "/api/v1/tenants/",
        "/t/acme/clusters/bob-live/",
        PAGE,
        "/static/frontend/app.css",
        "/admin/",
        "/c/acme/",
    ):
        answer = stranger.get(path)
        assert answer.status_code == 404, path
        assert "sessionid" not in answer.cookies and "csrftoken" not in answer.cookies
    answer = stranger.get(DASH)
    assert answer.status_code == 302 and answer["Location"].startswith(PRODUCT)
    assert kubesim.proxy_requests() == []


def test_the_product_route_only_redirects_when_the_origin_is_set(
    live_cluster: ClusterRequest, kubesim: Any, bob: Any, ray_origin: str
) -> None:
    product = _signed_in(bob)
    posted = product.post(
        PAGE + "api/jobs/",
        data="{}",
        content_type="application/json",
        HTTP_SEC_FETCH_SITE="same-origin",
    )
    assert posted.status_code == 403
    assert kubesim.proxy_requests() == []


def test_an_origin_per_cluster(
    live_cluster: ClusterRequest, kubesim: Any, bob: Any, settings: Any
) -> None:
    settings.RAY_PROXY_ORIGIN = "https://{cluster}.ray.example.com"
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, ".ray.example.com"]
    answer = _signed_in(bob).get(PAGE)
    link = urlsplit(answer["Location"])
    host = f"{cluster_label('acme', 'bob-live')}.ray.example.com"
    assert link.scheme == "https" and link.netloc == host
    browser = Client(HTTP_HOST=host)
    redeemed = browser.get(f"{link.path}?{link.query}", secure=True)
    assert redeemed.status_code == 302
    assert browser.cookies[SESSION_COOKIE]["secure"]
    assert browser.get(DASH, secure=True).status_code == 200
    # Another cluster's host does not serve this cluster's path.
    elsewhere = Client(HTTP_HOST=f"{cluster_label('acme', 'other')}.ray.example.com")
    elsewhere.cookies = browser.cookies
    assert elsewhere.get(DASH, secure=True).status_code == 404
    assert len(kubesim.proxy_requests()) == 1


# -- without RAY_PROXY_ORIGIN -----------------------------------------------------------


def test_without_an_origin_the_dashboard_is_sandboxed_on_the_product(
    live_cluster: ClusterRequest, kubesim: Any, bob: Any
) -> None:
    page = _signed_in(bob).get(PAGE)
    assert page.status_code == 200
    policy = [part.strip() for part in page["Content-Security-Policy"].split(";")]
    assert "sandbox" in policy
    assert "default-src 'self'" in policy  # the product's own policy still applies


def test_the_token_route_refuses_a_session_and_sandboxes_what_it_relays(
    live_cluster: ClusterRequest, kubesim: Any, bob: Any
) -> None:
    api = "/api/v1/tenants/acme/clusters/bob-live/ray/"
    refused = _signed_in(bob).get(api, HTTP_ACCEPT="text/html")
    assert refused.status_code == 401
    assert refused["Content-Type"] == "application/json"
    _, key = AuthToken.objects.create(user=bob)
    page = Client(HTTP_AUTHORIZATION=f"Token {key}").get(api)
    assert page.status_code == 200
    assert "sandbox" in [p.strip() for p in page["Content-Security-Policy"].split(";")]
    assert len(kubesim.proxy_requests()) == 1
