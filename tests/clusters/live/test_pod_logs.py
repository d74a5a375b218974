"""A cluster's pod logs through ``pods/log``: the API (JSON and plain text) and the
cluster page's log panel, against kubesim's synthetic Ray output."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from clusters.models import ClusterRequest

LOGS = "/api/v1/tenants/acme/clusters/bob-live/logs/"
PANEL = "/t/acme/clusters/bob-live/log/"


def test_the_head_log_is_the_default_and_every_pod_can_be_chosen(
    live_cluster: ClusterRequest, as_user: Any, vera: Any
) -> None:
    api = as_user(vera)  # viewers read logs too
    head = api.get(LOGS).json()
    assert head["pod"].startswith("bob-live-head")
    assert head["container"] == "ray-head"
    assert "Ray runtime started." in head["text"]
    roles = [p["role"] for p in head["pods"]]
    assert roles[0] == "head" and "worker" in roles
    worker = next(p for p in head["pods"] if p["role"] == "worker")
    chosen = api.get(LOGS, {"pod": worker["name"], "tail": 2}).json()
    assert chosen["pod"] == worker["name"] and chosen["container"] == "ray-worker"
    assert len(chosen["text"].splitlines()) <= 2 and chosen["truncated"]
    text = api.get(LOGS, {"format": "text", "tail": 5})
    assert text["Content-Type"].startswith("text/plain")
    assert b"Ray runtime started." in text.content or len(text.content.splitlines()) == 5


def test_a_pod_that_is_not_the_clusters_is_named_not_read(
    live_cluster: ClusterRequest, as_user: Any, bob: Any
) -> None:
    api = as_user(bob)
    found = api.get(LOGS, {"pod": "kube-apiserver"}).json()
    assert found["text"] == ""
    assert found["message"].startswith("'kube-apiserver' is not a pod of bob-live")
    bad = api.get(LOGS, {"container": "sidecar"}).json()
    assert "has no container 'sidecar'" in bad["message"]
    assert api.get(LOGS, {"tail": 0}).status_code == 400
    assert api.get(LOGS, {"tail": 999999}).status_code == 400


def test_the_page_panel_shows_the_head_log_and_follows(
    live_cluster: ClusterRequest, bob: Any, charlie: Any
) -> None:
    browser = Client()
    browser.force_login(bob)
    page = browser.get("/t/acme/clusters/bob-live/")
    assert b'hx-get="/t/acme/clusters/bob-live/log/"' in page.content
    panel = browser.get(PANEL)
    assert panel.status_code == 200
    html = panel.content.decode()
    assert "Ray runtime started." in html
    assert 'hx-trigger="every 3s"' in html  # following
    stopped = browser.get(PANEL, {"pod": "", "tail": 100}).content.decode()
    assert 'hx-trigger="every 3s"' not in stopped  # the box unticked: no more polling
    outsider = Client()
    outsider.force_login(charlie)
    assert outsider.get(PANEL).status_code == 404


@pytest.mark.django_db
def test_an_empty_log_as_text_says_why_with_its_content_type(
    acme: Any, bob: Any, l4: Any, as_user: Any
) -> None:
    """Found by the schema fuzzer: an empty text log lost its Content-Type (DRF drops the
    header of an empty body); it now says why there are no lines."""
    from clusters.requests import services
    from clusters.rows.spec import ClusterSpec

    cluster = services.cluster_request_create(
        actor=bob, tenant=acme, spec=ClusterSpec(flavor=l4, name="paused")
    )
    ClusterRequest.objects.filter(pk=cluster.pk).update(state="suspended")
    response = as_user(bob).get("/api/v1/tenants/acme/clusters/paused/logs/", {"format": "text"})
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    message = as_user(bob).get("/api/v1/tenants/acme/clusters/paused/logs/").json()["message"]
    assert message and response.content.decode() == f"({message})\n"
