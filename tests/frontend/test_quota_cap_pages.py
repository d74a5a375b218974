"""Caps on a tenant's quota per Kubernetes cluster on the platform's page of the tenant:
shown beside its quota, set and removed with the form, bad input kept on the form with
nothing changed, and a 404 for anybody but a platform admin. One browser test sets a cap
by filling and clicking the visible form."""

from __future__ import annotations

from html import unescape
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

import tests.frontend.browser  # noqa: F401  (sets DJANGO_ALLOW_ASYNC_UNSAFE first)
from clusters.models import KubeCluster, MemberQuotaCap
from tenants.models import AuditEvent
from tests.frontend.test_browser import sign_in
from tests.frontend.test_csp import Watcher

PAGE = "/platform/tenants/acme/"
CAPS = PAGE + "quota/caps/"


def client_for(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def cloud(db: Any) -> KubeCluster:
    return KubeCluster.objects.create(name="cloud", placement_order=10)


@pytest.mark.django_db
def test_a_cap_is_set_shown_and_removed_from_the_tenants_page(
    root: Any, acme: Any, cloud: KubeCluster
) -> None:
    client = client_for(root)
    page = unescape(client.get(PAGE).content.decode())
    assert "Caps per Kubernetes cluster" in page and "No caps" in page
    saved = client.post(CAPS, {"kube_cluster": "cloud", "flavor": "h100", "gpus": "8"}, follow=True)
    page = unescape(saved.content.decode())
    assert saved.redirect_chain[-1][0] == PAGE
    assert "acme may hold at most 8 h100 on cloud." in page
    start = page.index('data-cap="cloud/h100"')
    assert "8 GPUs" in page[start : page.index("</tr>", start)]
    assert MemberQuotaCap.objects.get(kube_cluster=cloud).gpus == 8
    assert AuditEvent.objects.filter(action="quota.cap_set").exists()
    removed = client.post(
        CAPS, {"kube_cluster": "cloud", "flavor": "h100", "gpus": ""}, follow=True
    )
    assert "acme has no cap on h100 on cloud now." in unescape(removed.content.decode())
    assert not MemberQuotaCap.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize(
    "form",
    [
        {"kube_cluster": "cloud", "flavor": "h100", "gpus": "-1"},
        {"kube_cluster": "nowhere", "flavor": "h100", "gpus": "4"},
        {"kube_cluster": "cloud", "flavor": "a100", "gpus": "4"},
        {"kube_cluster": "cloud", "flavor": "h100", "gpus": "many"},
    ],
)
def test_bad_input_stays_on_the_form_and_changes_nothing(
    root: Any, acme: Any, h100: Any, cloud: KubeCluster, form: dict[str, str]
) -> None:
    MemberQuotaCap.objects.create(kube_cluster=cloud, tenant=acme, flavor=h100, gpus=2)
    answer = client_for(root).post(CAPS, form)
    assert answer.status_code == 400
    assert 'class="error"' in answer.content.decode()
    assert list(MemberQuotaCap.objects.values_list("gpus", flat=True)) == [2]


@pytest.mark.django_db
def test_only_platform_admins_reach_the_form(alice: Any, acme: Any, cloud: KubeCluster) -> None:
    answer = client_for(alice).post(CAPS, {"kube_cluster": "cloud", "flavor": "h100", "gpus": "1"})
    assert answer.status_code == 404
    assert not MemberQuotaCap.objects.exists()


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_a_cap_is_set_by_filling_the_visible_form(
    page: Any, live_server: Any, browser_env: None, root: Any, acme: Any, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    KubeCluster.objects.create(name="cloud", placement_order=10)
    base = live_server.url
    watcher = Watcher(page)
    sign_in(page, base, "root")
    page.goto(base + PAGE)
    form = page.locator("#quota-cap-form")
    expect(form).to_be_visible()
    form.get_by_label("Kubernetes cluster").select_option("cloud")
    form.get_by_label("GPU flavor").select_option("h100")
    form.get_by_label("At most GPUs there").fill("8")
    page.screenshot(path=str(tmp_path / "quota-cap.png"), full_page=True)
    form.get_by_role("button", name="Save cap").click()
    expect(page.locator("#messages")).to_contain_text("acme may hold at most 8 h100 on cloud.")
    expect(page.locator('[data-cap="cloud/h100"]')).to_contain_text("8 GPUs")
    assert MemberQuotaCap.objects.get(tenant=acme).gpus == 8
    watcher.collect(PAGE)
    assert not watcher.problems, "\n".join(watcher.problems)


@pytest.mark.django_db
def test_the_tenants_members_see_its_caps_on_their_home_page(
    bob: Any, charlie: Any, acme: Any, h100: Any, cloud: KubeCluster
) -> None:
    MemberQuotaCap.objects.create(tenant=acme, kube_cluster=cloud, flavor=h100, gpus=3)
    body = unescape(client_for(bob).get("/").content.decode())
    assert "At most 3 h100 GPUs on cloud (the platform's caps per Kubernetes cluster" in body
    # Another tenant's member sees no cap of acme's.
    assert "data-caps" not in client_for(charlie).get("/").content.decode()
