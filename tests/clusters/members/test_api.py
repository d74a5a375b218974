"""``/api/v1/platform/kube-clusters/`` against a real kubesim: platform admins register,
change, cordon and check members; secrets never come back; refused credentials are a 400
with what failed and save nothing; tenant admins are refused."""

from __future__ import annotations

from typing import Any

from clusters.models import KubeCluster
from kubesim import KubeSim

URL = "/api/v1/platform/kube-clusters/"


def test_a_platform_admin_registers_reads_and_changes_a_member(
    as_user: Any, root: Any, acme: Any, member_sim: KubeSim
) -> None:
    api = as_user(root)
    body = {
        "name": "onprem",
        "server": member_sim.url,
        "token": "member-token",
        "region": "eu-west",
        "labels": {"site": "lab"},
        "placement_order": 10,
        "allowed_tenants": ["acme"],
    }
    created = api.post(URL, body, format="json")
    assert created.status_code == 201, created.content
    data = created.json()
    assert data["has_token"] is True and "token" not in data and "member-token" not in str(data)
    assert data["health"]["reachable"] is True
    assert data["health"]["kubernetes_version"].startswith("v1.")
    assert data["allowed_tenants"] == ["acme"] and data["schedulable"] == "active"

    listed = api.get(URL).json()
    assert "onprem" in [m["name"] for m in listed["results"]]

    changed = api.patch(
        URL + "onprem/", {"placement_order": 3, "allowed_tenants": []}, format="json"
    )
    assert changed.status_code == 200 and changed.json()["placement_order"] == 3
    assert changed.json()["allowed_tenants"] == []

    # A slug with a NUL names no tenant (PostgreSQL refuses it in a query): a 400.
    refused = api.patch(URL + "onprem/", {"allowed_tenants": ["ac\x00me"]}, format="json")
    assert refused.status_code == 400, refused.content
    assert "allowed_tenants" in refused.json()["error"]["fields"]

    cordoned = api.post(URL + "onprem/cordon/")
    assert cordoned.status_code == 200 and cordoned.json()["schedulable"] == "cordoned"
    assert api.post(URL + "onprem/uncordon/").json()["schedulable"] == "active"

    checked = api.post(URL + "onprem/check/")
    assert checked.status_code == 200 and checked.json()["passed"] is True

    assert api.delete(URL + "onprem/").status_code == 204
    assert not KubeCluster.objects.filter(name="onprem").exists()


def test_refused_credentials_are_a_400_that_says_why_and_save_nothing(
    as_user: Any, root: Any, member_sim: KubeSim
) -> None:
    api = as_user(root)
    for token, words in (
        ("wrong", "401 Unauthorized"),
        ("narrow-token", "rayclusters.ray.io (delete)"),
    ):
        refused = api.post(
            URL, {"name": "onprem", "server": member_sim.url, "token": token}, format="json"
        )
        assert refused.status_code == 400, refused.content
        error = refused.json()["error"]
        assert error["code"] == "credentials_refused" and words in error["message"], error
    url = member_sim.url
    member_sim.stop()
    unreachable = api.post(URL, {"name": "onprem", "server": url, "token": "t"}, format="json")
    assert unreachable.status_code == 400
    assert unreachable.json()["error"]["message"].startswith(f"Cannot reach {url}")
    assert not KubeCluster.objects.filter(name="onprem").exists()


def test_a_token_and_a_certificate_together_are_refused_before_any_check(
    as_user: Any, root: Any
) -> None:
    body = {
        "name": "both",
        "server": "http://127.0.0.1:1",
        "token": "t",
        "client_certificate": "c",
        "client_key": "k",
    }
    refused = as_user(root).post(URL, body, format="json")
    assert refused.status_code == 400
    assert "not both" in refused.json()["error"]["message"]


def test_tenant_admins_and_engineers_are_refused(
    as_user: Any, alice: Any, bob: Any, member_sim: KubeSim
) -> None:
    body = {"name": "onprem", "server": member_sim.url, "token": "member-token"}
    for user in (alice, bob):
        api = as_user(user)
        assert api.get(URL).status_code == 403
        assert api.post(URL, body, format="json").status_code == 403
    assert as_user(None).get(URL).status_code == 401
    assert not KubeCluster.objects.filter(name="onprem").exists()
