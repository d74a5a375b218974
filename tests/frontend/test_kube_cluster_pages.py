"""The fleet's pages: platform admins list the Kubernetes clusters with their health,
register one with the form (a refusal stays on the form, saying what failed, and saves
nothing), and cordon, uncordon and check one from its page. One browser test registers a
cluster by filling and clicking the visible form."""

from __future__ import annotations

from html import unescape
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

import tests.frontend.browser  # noqa: F401  (sets DJANGO_ALLOW_ASYNC_UNSAFE first)
from clusters.models import ClusterRequest, KubeCluster
from kubesim import KubeSim
from tenants.models import AuditEvent
from tests.clusters.members.conftest import member_sim  # noqa: F401 (a fixture)
from tests.frontend.test_browser import sign_in
from tests.frontend.test_csp import Watcher

URL = "/platform/kube-clusters/"


def client_for(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.django_db
def test_register_cordon_and_check_through_the_pages(
    root: Any,
    acme: Any,
    member_sim: KubeSim,  # noqa: F811
) -> None:
    client = client_for(root)
    form = {
        "name": "onprem",
        "server": member_sim.url,
        "token": "narrow-token",
        "region": "eu",
        "labels": "site=lab, tier=onprem",
        "placement_order": "10",
        "allowed_tenants": ["acme"],
    }
    refused = client.post(URL, form)
    assert refused.status_code == 400
    assert "rayclusters.ray.io (delete)" in unescape(refused.content.decode())
    assert not KubeCluster.objects.filter(name="onprem").exists()

    registered = client.post(URL, {**form, "token": "member-token"}, follow=True)
    assert registered.redirect_chain[-1][0] == URL + "onprem/"
    page = unescape(registered.content.decode())
    assert "Registered onprem." in page and "KubeRay" in page and "member-token" not in page
    member = KubeCluster.objects.get(name="onprem")
    assert member.labels == {"site": "lab", "tier": "onprem"} and member.region == "eu"
    assert [t.slug for t in member.allowed_tenants.all()] == ["acme"]

    listed = client.get(URL).content.decode()
    start = listed.index('data-kube-cluster="onprem"')
    row = listed[start : listed.index("</tr>", start)]
    assert "yes" in row and " ms" in row and "KubeRay" in row
    assert 'href="/platform/kube-clusters/"' in listed  # the platform tabs link the page

    cordoned = client.post(URL + "onprem/cordon/", follow=True).content.decode()
    assert "onprem is cordoned" in cordoned and "Uncordon" in cordoned
    assert KubeCluster.objects.get(name="onprem").schedulable == "cordoned"
    client.post(URL + "onprem/uncordon/")
    assert KubeCluster.objects.get(name="onprem").schedulable == "active"
    assert (
        "onprem passes the check"
        in client.post(URL + "onprem/check/", follow=True).content.decode()
    )
    assert client.post(URL + "onprem/pause/").status_code == 404
    actions = set(AuditEvent.objects.unscoped().values_list("action", flat=True))
    assert {"kube_cluster.register", "kube_cluster.cordon", "kube_cluster.uncordon"} <= actions


@pytest.mark.django_db
def test_only_platform_admins_see_the_pages(alice: Any, bob: Any) -> None:
    KubeCluster.objects.get_or_create(name="spare", defaults={"server": "http://127.0.0.1:9"})
    for user in (alice, bob):
        client = client_for(user)
        assert client.get(URL).status_code == 404
        assert client.get(URL + "spare/").status_code == 404
        assert client.post(URL + "spare/cordon/").status_code == 404
    assert KubeCluster.objects.get(name="spare").schedulable == "active"


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_a_cluster_is_registered_by_filling_the_visible_form(
    page: Any,
    live_server: Any,
    browser_env: None,
    root: Any,
    member_sim: KubeSim,  # noqa: F811
    tmp_path: Path,
) -> None:
    from playwright.sync_api import expect

    base = live_server.url
    watcher = Watcher(page)
    sign_in(page, base, "root")
    page.goto(base + "/platform/tenants/")
    page.get_by_role("link", name="Kubernetes clusters").click()
    page.wait_for_url(base + URL)
    page.get_by_label("Name").fill("cloud")
    page.get_by_label("API server URL").fill(member_sim.url)
    page.get_by_label("Service account token").fill("member-token")
    page.get_by_label("Region").fill("us-east")
    page.get_by_label("Placement order").fill("20")
    page.screenshot(path=str(tmp_path / "register.png"), full_page=True)
    page.get_by_role("button", name="Register cluster").click()
    page.wait_for_url(base + URL + "cloud/")
    expect(page.locator("#messages")).to_contain_text("Registered cloud.")
    expect(page.locator('[data-health="reachable"]')).to_have_text("yes")
    page.screenshot(path=str(tmp_path / "kube-cluster.png"), full_page=True)
    page.once("dialog", lambda dialog: dialog.accept())  # it asks first
    page.get_by_role("button", name="Cordon").click()
    expect(page.locator("#messages")).to_contain_text("cloud is cordoned")
    assert KubeCluster.objects.get(name="cloud").schedulable == "cordoned"
    watcher.collect(URL + "cloud/")
    assert not watcher.problems, "\n".join(watcher.problems)


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_a_cluster_is_drained_and_the_drain_ended_by_clicking_its_buttons(
    page: Any,
    live_server: Any,
    browser_env: None,
    root: Any,
    acme: Any,
    bob: Any,
    h100: Any,
    tmp_path: Path,
) -> None:
    from playwright.sync_api import expect

    spare = KubeCluster.objects.create(name="spare", server="http://127.0.0.1:9")
    ClusterRequest.objects.create(
        tenant=acme,
        owner=bob,
        flavor=h100,
        name="train",
        workload="job",
        kind="dev",
        workers=1,
        state="running",
        kube_cluster=spare,
    )
    base = live_server.url
    watcher = Watcher(page)
    sign_in(page, base, "root")
    page.goto(base + URL + "spare/")
    page.once("dialog", lambda dialog: dialog.accept())  # it asks first
    page.get_by_role("button", name="Drain", exact=True).click()
    expect(page.locator("#messages")).to_contain_text("spare is draining")
    expect(page.locator('[data-drain="status"]')).to_contain_text("1 workload still here")
    expect(page.locator('[data-drain="wait"]')).to_have_text("1")
    member = KubeCluster.objects.get(name="spare")
    assert (member.schedulable, member.drain_mode) == ("draining", "default")
    page.screenshot(path=str(tmp_path / "draining.png"), full_page=True)
    page.get_by_role("button", name="End the drain").click()
    expect(page.locator("#messages")).to_contain_text("spare takes new placements again")
    expect(page.locator('[data-drain="status"]')).to_have_count(0)
    assert KubeCluster.objects.get(name="spare").schedulable == "active"
    watcher.collect(URL + "spare/")
    assert not watcher.problems, "\n".join(watcher.problems)


@pytest.mark.django_db
def test_the_page_drains_a_member_jobs_too_and_shows_the_times(root: Any) -> None:
    KubeCluster.objects.create(
        name="spare", server="http://127.0.0.1:9", detect_seconds=4.2, replace_seconds=9.5
    )
    client = client_for(root)
    page = client.post(URL + "spare/drain-requeue/", follow=True).content.decode()
    assert "spare is draining" in page and "Requeue everything, jobs too" in page
    assert "4.2 s" in page and "9.5 s" in page
    member = KubeCluster.objects.get(name="spare")
    assert (member.schedulable, member.drain_mode) == ("draining", "requeue")
    assert "0 workloads still here" in page  # the engine has not stepped yet
