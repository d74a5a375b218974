"""Who may open a cluster's JupyterLab: its owner and the tenant's admins, nobody else.

On the product ("Open JupyterLab") and on the clusters' origin, where a session made for
the Ray dashboard must not open the notebook of someone who may only look. Refusals come
before anything is forwarded, so no kubesim runs here; the real JupyterLab is in
``test_notebook.py``.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from django.test import Client

from clusters.live.ray_grants import SESSION_COOKIE, DashboardPass, session_cookie_value
from tenants.models import Role
from tests.factories import MembershipFactory, UserFactory
from tests.frontend.conftest import make_ready

pytestmark = pytest.mark.django_db

ORIGIN = "http://clusters.example.test"
OPEN = "/t/acme/clusters/bob-nb/notebook/"


@pytest.fixture
def notebook_cluster(bob: Any, request_cluster: Any, settings: Any) -> Any:
    settings.RAY_PROXY_ORIGIN = ORIGIN
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "clusters.example.test"]
    return make_ready(request_cluster(bob, name="bob-nb", notebook=True))


@pytest.fixture
def dave(acme: Any) -> Any:
    """Another engineer of acme: a member, not the cluster's owner."""
    user = UserFactory(username="dave")
    MembershipFactory(tenant=acme, user=user, role=Role.ENGINEER)
    return user


def _as(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.parametrize("who", ["bob", "alice"])
def test_the_owner_and_a_tenant_admin_get_a_grant_to_the_notebook(
    who: str, notebook_cluster: Any, request: Any
) -> None:
    answer = _as(request.getfixturevalue(who)).get(OPEN)
    assert answer.status_code == 302
    where = urlsplit(answer["Location"])
    assert f"{where.scheme}://{where.netloc}" == ORIGIN
    assert where.path == "/grant" and parse_qs(where.query)["g"]


@pytest.mark.parametrize("who", ["dave", "vera"])
def test_another_member_gets_a_403_page_that_says_who_may(
    who: str, notebook_cluster: Any, request: Any
) -> None:
    answer = _as(request.getfixturevalue(who)).get(OPEN)
    assert answer.status_code == 403
    text = answer.content.decode()
    assert "only bob and the tenant&#x27;s admins may open it" in text
    assert "Location" not in answer


def test_another_tenants_user_and_a_cluster_without_notebook_are_404(
    notebook_cluster: Any, charlie: Any, bob: Any, request_cluster: Any
) -> None:
    assert _as(charlie).get(OPEN).status_code == 404
    make_ready(request_cluster(bob, name="bob-plain"))
    assert _as(bob).get("/t/acme/clusters/bob-plain/notebook/").status_code == 404


def test_without_the_clusters_origin_the_notebook_does_not_open(
    notebook_cluster: Any, bob: Any, settings: Any
) -> None:
    settings.RAY_PROXY_ORIGIN = ""
    answer = _as(bob).get(OPEN)
    assert answer.status_code == 409
    assert b"RAY_PROXY_ORIGIN" in answer.content


def _origin_session(cluster: Any, user: Any, role: str) -> Client:
    """A browser on the clusters' origin holding a dashboard session for ``user``."""
    client = Client(HTTP_HOST="clusters.example.test")
    grant = DashboardPass(
        slug="acme", name=cluster.name, cluster_id=cluster.pk, user_id=user.pk, role=role, sid="s"
    )
    client.cookies[SESSION_COOKIE] = session_cookie_value(grant)
    return client


def test_a_dashboard_session_of_a_viewer_does_not_open_the_notebook_on_the_origin(
    notebook_cluster: Any, vera: Any, dave: Any
) -> None:
    for user, role in ((vera, "viewer"), (dave, "engineer")):
        answer = _origin_session(notebook_cluster, user, role).get(
            "/c/acme/bob-nb/notebook/lab", HTTP_ACCEPT="text/html"
        )
        assert answer.status_code == 403
        assert b"<h1>403: not allowed</h1>" in answer.content
        assert b"only bob and the tenant&#x27;s admins may open it" in answer.content


def test_the_cluster_page_offers_the_notebook_to_whoever_may_open_it(
    notebook_cluster: Any, bob: Any, vera: Any
) -> None:
    page = _as(bob).get("/t/acme/clusters/bob-nb/").content.decode()
    assert 'id="notebook-link"' in page and ">Open JupyterLab</a>" in page
    page = _as(vera).get("/t/acme/clusters/bob-nb/").content.decode()
    assert "Open JupyterLab" not in page
    assert "only bob and the tenant's admins can open it" in page
