"""The Ray dashboard proxy, end to end: a request to the product goes through the gateway
to kubesim's service proxy and its Ray dashboard, and what kubesim received is checked
(``/_kubesim/proxy-requests``) — the product's session cookie and API token must never
be among it.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client
from knox.models import AuthToken

from clusters.live.ray_proxy import AUDIT_ACTION
from clusters.models import ClusterRequest
from clusters.requests import services
from tenants.models import AuditEvent

API = "/api/v1/tenants/acme/clusters/bob-live/ray/"
PAGE = "/t/acme/clusters/bob-live/ray/"


def _token_client(user: Any) -> tuple[Client, str]:
    _, key = AuthToken.objects.create(user=user)
    return Client(HTTP_AUTHORIZATION=f"Token {key}"), key


def _seen(kubesim: Any) -> list[dict[str, Any]]:
    return list(kubesim.proxy_requests())


def _body(response: Any) -> bytes:
    return b"".join(response.streaming_content) if response.streaming else response.content


def test_a_token_reaches_the_ray_dashboard_api_and_submits_a_job(
    live_cluster: ClusterRequest, kubesim: Any, bob: Any
) -> None:
    client, key = _token_client(bob)
    version = client.get(API + "api/version")
    assert version.status_code == 200, _body(version)
    assert version.streaming  # relayed as it comes, never buffered whole
    assert json.loads(_body(version))["ray_version"] == "2.49.2"
    submitted = client.post(
        API + "api/jobs/",
        data=json.dumps(
            {"entrypoint": "python train.py", "metadata": {"kubesim.io/job-run-seconds": "30"}}
        ),
        content_type="application/json",
    )
    assert submitted.status_code == 200, _body(submitted)
    job_id = json.loads(_body(submitted))["submission_id"]
    listed = json.loads(_body(client.get(API + "api/jobs/")))
    assert job_id in [j.get("submission_id") for j in listed]
    one = json.loads(_body(client.get(API + f"api/jobs/{job_id}")))
    assert one["entrypoint"] == "python train.py"
    # What the dashboard got: never the product's token, never a cookie of the product.
    requests = _seen(kubesim)
    assert [r["path"] for r in requests][:2] == ["/api/version", "/api/jobs/"]
    for request in requests:
        sent = json.dumps(request)
        assert key not in sent
        assert "sessionid" not in sent and "csrftoken" not in sent
        assert not request["cookies"]
        forwarded = {k.lower() for k in request["forwardedHeaders"]}
        assert "authorization" not in forwarded and "cookie" not in forwarded


def test_the_browser_gets_the_dashboard_page_without_its_cookies_going_along(
    live_cluster: ClusterRequest, kubesim: Any, bob: Any
) -> None:
    browser = Client()
    browser.force_login(bob)
    browser.cookies["csrftoken"] = "a" * 32
    page = browser.get(PAGE)
    assert page.status_code == 200
    assert page["Content-Type"].startswith("text/html")
    html = _body(page).decode()
    assert "Ray" in html and "bob-live" in html
    assert 'href="/' not in html and 'src="/' not in html  # relative links stay under /ray/
    assert "'unsafe-inline'" in page["Content-Security-Policy"]  # Ray's inline styles
    (request,) = _seen(kubesim)
    assert not request["cookies"] and "Cookie" not in request["headers"]
    session_key = browser.cookies["sessionid"].value
    assert session_key not in json.dumps(request)


def test_another_tenant_gets_404_and_nothing_is_forwarded(
    live_cluster: ClusterRequest, kubesim: Any, charlie: Any
) -> None:
    client, _ = _token_client(charlie)
    assert client.get(API + "api/version").status_code == 404
    browser = Client()
    browser.force_login(charlie)
    assert browser.get(PAGE).status_code == 404
    assert client.get("/api/v1/tenants/acme/clusters/no-such/ray/").status_code == 404
    assert _seen(kubesim) == []


def test_without_a_token_the_api_proxy_is_401_and_the_page_asks_to_sign_in(
    live_cluster: ClusterRequest, kubesim: Any
) -> None:
    anonymous = Client()
    refused = anonymous.get(API + "api/version")
    assert refused.status_code == 401 and refused["WWW-Authenticate"] == "Token"
    assert anonymous.get(PAGE).status_code == 302
    assert Client(HTTP_AUTHORIZATION="Token nope").get(API).status_code == 401
    assert _seen(kubesim) == []


def test_a_viewer_may_look_but_not_submit(
    live_cluster: ClusterRequest, kubesim: Any, vera: Any
) -> None:
    client, _ = _token_client(vera)
    assert client.get(API + "api/jobs/").status_code == 200
    refused = client.post(
        API + "api/jobs/", data=json.dumps({"entrypoint": "x"}), content_type="application/json"
    )
    assert refused.status_code == 403
    assert "bob" in refused.json()["error"]["message"]
    assert [r["method"] for r in _seen(kubesim)] == ["GET"]


def test_a_write_from_another_site_is_refused_and_one_from_the_dashboard_goes_through(
    live_cluster: ClusterRequest, kubesim: Any, bob: Any
) -> None:
    browser = Client()
    browser.force_login(bob)
    body = json.dumps({"entrypoint": "python x.py"})
    cross = browser.post(
        PAGE + "api/jobs/",
        data=body,
        content_type="application/json",
        HTTP_SEC_FETCH_SITE="cross-site",
    )
    assert cross.status_code == 403
    bare = browser.post(PAGE + "api/jobs/", data=body, content_type="application/json")
    assert bare.status_code == 403  # no word from the browser on where it came from
    assert _seen(kubesim) == []
    same = browser.post(
        PAGE + "api/jobs/",
        data=body,
        content_type="application/json",
        HTTP_SEC_FETCH_SITE="same-origin",
    )
    assert same.status_code == 200, _body(same)
    assert [r["method"] for r in _seen(kubesim)] == ["POST"]


@pytest.mark.parametrize("path", ["../../pods", "api/../../secrets", "%2e%2e/%2e%2e/pods", "a\\b"])
def test_a_path_that_climbs_out_of_the_proxy_is_refused(
    live_cluster: ClusterRequest, kubesim: Any, bob: Any, path: str
) -> None:
    client, _ = _token_client(bob)
    response = client.get(API + path)
    assert response.status_code in (400, 404)
    assert _seen(kubesim) == []


def test_a_body_over_the_limit_is_refused_before_anything_is_sent(
    live_cluster: ClusterRequest, kubesim: Any, bob: Any, settings: Any
) -> None:
    settings.RAY_PROXY_MAX_BODY_MB = 1
    client, _ = _token_client(bob)
    response = client.put(
        API + "api/packages/gcs/_ray_pkg_x.zip",
        data=b"x" * (1024 * 1024 + 1),
        content_type="application/octet-stream",
    )
    assert response.status_code == 413
    assert "RAY_PROXY_MAX_BODY_MB" in response.json()["error"]["message"]
    assert _seen(kubesim) == []


def test_one_audit_event_per_session_and_the_visit_counts_as_use(
    live_cluster: ClusterRequest, kubesim: Any, bob: Any
) -> None:
    client, _ = _token_client(bob)
    for _ in range(3):
        assert client.get(API + "api/version").status_code == 200
    other, _ = _token_client(bob)
    assert other.get(API + "api/jobs/").status_code == 200
    events = AuditEvent.objects.filter(
        action=AUDIT_ACTION, object_id=str(live_cluster.pk)
    ).order_by("at", "id")
    assert [e.data["via"] for e in events] == ["api", "api"]
    assert events[0].data["path"] == "/api/version"
    live_cluster.refresh_from_db()
    assert live_cluster.last_active_at is not None


def test_a_cluster_that_is_not_ready_is_409_with_its_state(
    live_cluster: ClusterRequest, kubesim: Any, bob: Any, alice: Any
) -> None:
    services.cluster_suspend(actor=alice, cluster=live_cluster)
    client, _ = _token_client(bob)
    response = client.get(API + "api/version")
    assert response.status_code == 409
    assert response.json()["error"]["message"].startswith("bob-live is suspended")
    assert _seen(kubesim) == []


def test_the_cluster_api_lists_the_ways_to_connect(
    live_cluster: ClusterRequest, as_user: Any, bob: Any
) -> None:
    endpoints = as_user(bob).get("/api/v1/tenants/acme/clusters/bob-live/").json()["endpoints"]
    assert endpoints["api_proxy_url"] == "http://testserver" + API
    assert endpoints["dashboard_proxy_url"] == "http://testserver" + PAGE
    assert endpoints["port_forward"] == (
        "kubectl port-forward -n gw-acme service/bob-live-head-svc 8265:8265 10001:10001"
    )
    assert "JobSubmissionClient(" in endpoints["jobs_snippet"]
    assert API in endpoints["jobs_snippet"]


def test_under_asgi_the_answer_is_relayed_as_it_comes(
    live_cluster: ClusterRequest, kubesim: Any, bob: Any
) -> None:
    """The web server serves ASGI: a blocking stream handed to Django there is read whole
    before a byte is sent, so the relay hands it an asynchronous one, read a chunk at a
    time."""
    from asgiref.sync import async_to_sync
    from django.test import AsyncClient

    _, key = _token_client(bob)

    async def fetch() -> tuple[Any, bytes]:
        response = await AsyncClient().get(
            API + "api/version", headers={"Authorization": f"Token {key}"}
        )
        return response, b"".join([chunk async for chunk in response.streaming_content])

    response, body = async_to_sync(fetch)()
    assert response.status_code == 200 and response.streaming and response.is_async
    assert json.loads(body)["ray_version"] == "2.49.2"
