"""The allow-list of the Ray dashboard's routes (``clusters/live/ray_routes.py``): first
the table itself, then through the proxy for each role, end to end to kubesim's dashboard
(what is refused never reaches it)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client
from knox.models import AuthToken

from clusters.live.ray_routes import ray_route_allowed, route_refusal
from clusters.models import ClusterRequest
from tenants.models import Role
from tests.factories import MembershipFactory, UserFactory

API = "/api/v1/tenants/acme/clusters/bob-live/ray/"
PAGE = "/t/acme/clusters/bob-live/ray/"
KILL = "api/actors/kill?actor_id=" + "ab" * 16

# (method, path, a viewer may, whoever may manage may)
TABLE = [
    ("GET", "", True, True),
    ("GET", "/", True, True),
    ("GET", "static/js/main.3f2a.js", True, True),
    ("GET", "favicon.ico", True, True),
    ("GET", "api/version", True, True),
    ("GET", "api/jobs/", True, True),
    ("GET", "api/jobs/raysubmit_abc", True, True),
    ("GET", "api/jobs/raysubmit_abc/logs", True, True),
    ("GET", "api/jobs/raysubmit_abc/logs/tail", True, True),
    ("GET", "api/cluster_status", True, True),
    ("GET", "nodes", True, True),
    ("GET", "nodes/3f2a", True, True),
    ("GET", "logical/actors", True, True),
    ("GET", "api/v0/actors", True, True),
    ("GET", "api/v0/logs/file", True, True),
    ("GET", "api/grafana_health", True, True),
    ("HEAD", "api/jobs/", True, True),
    ("POST", "api/jobs/", False, True),
    ("POST", "api/jobs/raysubmit_abc/stop", False, True),
    ("DELETE", "api/jobs/raysubmit_abc", False, True),
    ("PUT", "api/packages/gcs/_ray_pkg_abc.zip", False, True),
    ("GET", "api/packages/gcs/_ray_pkg_abc.zip", False, True),
    # Changes made with a GET (and HEAD, which runs the GET handler).
    ("GET", "api/actors/kill", False, True),
    ("HEAD", "api/actors/kill", False, True),
    ("GET", "worker/cpu_profile", False, True),
    ("GET", "task/traceback", False, True),
    ("GET", "memory_profile", False, True),
    ("PUT", "api/serve/applications/", False, True),
    ("DELETE", "api/serve/applications/", False, True),
    # Not on the list, for anyone: unknown routes, debugging routes, other methods.
    ("GET", "api/v0/delay/5", False, False),
    ("GET", "api/jobs", False, False),
    ("OPTIONS", "api/jobs/", False, False),
    ("PATCH", "api/jobs/raysubmit_abc", False, False),
    ("DELETE", "api/jobs/", False, False),
    ("POST", "api/actors/kill", False, False),
    # Spellings Ray would route elsewhere, or nowhere.
    ("GET", "api//actors/kill", False, False),
    ("GET", "//api/actors/kill", False, False),
    ("GET", "API/actors/kill", False, False),
    ("GET", "api/Actors/kill", False, False),
    ("GET", "api/actors/kill.", False, False),
    ("GET", "api/actors/kill/", False, False),
    ("GET", "api/jobs//logs", False, False),
    ("GET", "static/", False, False),
    ("POST", "API/jobs/", False, False),
]


@pytest.mark.parametrize(("method", "path", "viewer", "manager"), TABLE)
def test_the_allow_list(method: str, path: str, viewer: bool, manager: bool) -> None:
    assert ray_route_allowed(method=method, path=path, can_manage=False) is viewer
    assert ray_route_allowed(method=method, path=path, can_manage=True) is manager


def test_a_refusal_says_why() -> None:
    assert route_refusal(method="GET", path="api/actors/kill", can_manage=False) == (
        "it changes what runs on the cluster"
    )
    assert "does not forward" in str(
        route_refusal(method="GET", path="api/v0/delay/5", can_manage=True)
    )


# -- through the proxy, per role --------------------------------------------------------


def _body(response: Any) -> bytes:
    return b"".join(response.streaming_content) if response.streaming else response.content


@pytest.fixture
def users(acme: Any, alice: Any, bob: Any, vera: Any, root: Any) -> dict[str, Any]:
    other = UserFactory(username="erin")
    MembershipFactory(tenant=acme, user=other, role=Role.ENGINEER)
    return {
        "viewer": vera,
        "engineer who owns it": bob,
        "engineer who does not own it": other,
        "tenant admin": alice,
        "platform admin": root,
    }


def _token(user: Any) -> Client:
    _, key = AuthToken.objects.create(user=user)
    return Client(HTTP_AUTHORIZATION=f"Token {key}")


MANAGERS = {"engineer who owns it", "tenant admin", "platform admin"}
LABELS = {
    "viewer": "a viewer",
    "engineer who owns it": "the engineer who owns it",
    "engineer who does not own it": "an engineer who does not own it",
    "tenant admin": "a tenant admin",
    "platform admin": "a platform admin",
}


@pytest.mark.parametrize("role", sorted(LABELS))
def test_killing_an_actor_with_a_get_is_for_those_who_may_manage_the_cluster(
    live_cluster: ClusterRequest, kubesim: Any, users: dict[str, Any], role: str
) -> None:
    client = _token(users[role])
    assert client.get(API + "api/jobs/").status_code == 200  # every role reads
    answer = client.get(API + KILL)
    seen = [r["path"] for r in kubesim.proxy_requests()]
    if role in MANAGERS:
        assert answer.status_code != 403, _body(answer)
        assert seen == ["/api/jobs/", "/api/actors/kill"]
    else:
        assert answer.status_code == 403
        error = answer.json()["error"]
        assert error["code"] == "permission_denied"
        assert error["message"].startswith(
            f"GET /api/actors/kill is not allowed for {LABELS[role]} of bob-live: it "
            "changes what runs on the cluster. Only bob and the tenant's admins may"
        )
        assert seen == ["/api/jobs/"]


@pytest.mark.parametrize("role", sorted(LABELS))
def test_submitting_a_job_is_for_those_who_may_manage_and_unknown_routes_for_no_one(
    live_cluster: ClusterRequest, kubesim: Any, users: dict[str, Any], role: str
) -> None:
    client = _token(users[role])
    submitted = client.post(
        API + "api/jobs/",
        data=json.dumps({"entrypoint": "python x.py"}),
        content_type="application/json",
    )
    assert (submitted.status_code == 200) is (role in MANAGERS), _body(submitted)
    debug = client.get(API + "api/v0/delay/5")
    assert debug.status_code == 403
    assert debug.json()["error"]["message"] == (
        f"GET /api/v0/delay/5 is not allowed for {LABELS[role]} of bob-live: the proxy "
        "does not forward this route of the Ray dashboard."
    )
    methods = [r["method"] for r in kubesim.proxy_requests()]
    assert methods == (["POST"] if role in MANAGERS else [])


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("api%2Factors%2Fkill", 403),  # decoded before matching: the kill route
        ("api%252Factors%252Fkill", 403),  # decoded twice, as it would be forwarded
        ("api//actors/kill", 403),
        ("API/actors/kill", 403),
        ("api/actors/kill.", 403),
        ("api/actors/kill%2e", 403),
        ("api/jobs/../actors/kill", 400),
        ("api/jobs/%2e%2e/actors/kill", 400),
        ("api/jobs/%252e%252e/actors/kill", 400),
    ],
)
def test_path_tricks_do_not_reach_the_kill_route(
    live_cluster: ClusterRequest, kubesim: Any, vera: Any, path: str, status: int
) -> None:
    answer = _token(vera).get(API + path + "?actor_id=" + "ab" * 16)
    assert answer.status_code == status, _body(answer)
    assert kubesim.proxy_requests() == []


def test_head_follows_get_and_options_is_refused(
    live_cluster: ClusterRequest, kubesim: Any, vera: Any, bob: Any
) -> None:
    # HEAD of a read route is forwarded (the table above); kubesim's server answers no
    # HEAD at all, so only the refusals are checked end to end here.
    assert _token(vera).head(API + "api/actors/kill?actor_id=ab").status_code == 403
    assert _token(bob).options(API + "api/jobs/").status_code == 403
    assert kubesim.proxy_requests() == []


def test_a_page_load_gets_the_refusal_as_a_page(
    live_cluster: ClusterRequest, kubesim: Any, vera: Any
) -> None:
    browser = Client()
    browser.force_login(vera)
    answer = browser.get(PAGE + KILL, HTTP_ACCEPT="text/html,application/xhtml+xml")
    assert answer.status_code == 403
    assert answer["Content-Type"].startswith("text/html")
    assert "GET /api/actors/kill is not allowed for a viewer of bob-live" in answer.text
    assert kubesim.proxy_requests() == []
