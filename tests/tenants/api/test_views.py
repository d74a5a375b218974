"""Behaviour of the tenants API beyond access: tokens, throttling, audit, members,
quotas and the catalogue."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import connection
from knox.models import AuthToken
from rest_framework.test import APIClient

from tenants.models import AuditEvent, GpuFlavor, Membership, Quota, Role
from tenants.selectors import role_may_grant
from tests.factories import MembershipFactory, UserFactory

PASSWORD = "correct-horse-battery"


# --- Tokens -------------------------------------------------------------------------


def test_token_flow_obtain_use_revoke(bob: Any) -> None:
    client = APIClient()
    response = client.post("/api/v1/auth/token/", {"username": "bob", "password": PASSWORD})
    assert response.status_code == 200
    key = response.json()["token"]
    assert response.json()["username"] == "bob"

    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert client.get("/api/v1/users/me/").json()["username"] == "bob"

    # Only a hash is stored: no column of the token table holds the key.
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM knox_authtoken")
        rows = cursor.fetchall()
    assert rows and not any(key in str(value) for row in rows for value in row)

    assert client.delete("/api/v1/auth/token/").status_code == 204
    assert AuthToken.objects.count() == 0
    assert client.get("/api/v1/users/me/").status_code == 401


def test_wrong_password_issues_no_token(bob: Any) -> None:
    response = APIClient().post("/api/v1/auth/token/", {"username": "bob", "password": "nope"})
    assert response.status_code == 400
    assert AuthToken.objects.count() == 0


def test_token_endpoint_is_throttled(bob: Any, monkeypatch: Any) -> None:
    from controlplane.api.throttles import AuthThrottle

    # DRF copies the rates onto the throttle class when it is defined, so a small rate
    # for this test goes on the class; the autouse fixture cleared the counters.
    monkeypatch.setattr(AuthThrottle, "THROTTLE_RATES", {"auth": "3/min"})
    client = APIClient()
    codes = [
        client.post("/api/v1/auth/token/", {"username": "bob", "password": "nope"}).status_code
        for _ in range(4)
    ]
    assert codes == [400, 400, 400, 429]
    # Even the right password is refused while throttled.
    ok = client.post("/api/v1/auth/token/", {"username": "bob", "password": PASSWORD})
    assert ok.status_code == 429
    assert ok.json()["error"]["code"] == "throttled"
    assert AuthToken.objects.count() == 0


# --- Audit: every mutation writes exactly one event with the request id ---------------

MUTATIONS = [
    (
        "root",
        "POST",
        "/api/v1/users/",
        {"username": "zed", "email": "z@example.com", "password": "a-long-unusual-pass-42"},
        "user.create",
        None,
    ),
    (
        "root",
        "POST",
        "/api/v1/flavors/",
        {
            "name": "a10",
            "gpu_product": "NVIDIA-A10",
            "gpus_per_node": 4,
            "cpu_per_node": 64,
            "memory_per_node_gib": 256,
        },
        "flavor.create",
        None,
    ),
    ("root", "PATCH", "/api/v1/flavors/h100/", {"node_count": 8}, "flavor.update", None),
    (
        "root",
        "POST",
        "/api/v1/tenants/",
        {"slug": "initech", "name": "Initech"},
        "tenant.create",
        "initech",
    ),
    ("root", "PATCH", "/api/v1/tenants/acme/", {"weight": 2}, "tenant.update", "acme"),
    (
        "alice",
        "POST",
        "/api/v1/tenants/acme/members/",
        {"username": "charlie", "role": "viewer"},
        "membership.add",
        "acme",
    ),
    ("alice", "DELETE", "/api/v1/tenants/acme/members/bob/", None, "membership.remove", "acme"),
    (
        "root",
        "PUT",
        "/api/v1/tenants/acme/quotas/",
        {"flavors": [{"flavor": "l4", "gpus": 3}], "cpu": 5, "memory_gib": 6},
        "quota.set",
        "acme",
    ),
    (
        "anon",
        "POST",
        "/api/v1/auth/token/",
        {"username": "bob", "password": PASSWORD},
        "token.create",
        None,
    ),
]


@pytest.mark.parametrize(
    ("actor", "method", "url", "body", "action", "tenant"),
    MUTATIONS,
    ids=[m[4] for m in MUTATIONS],
)
def test_every_mutation_writes_one_audit_event(
    everyone: Any,
    as_user: Any,
    actor: str,
    method: str,
    url: str,
    body: Any,
    action: str,
    tenant: str | None,
) -> None:
    before = AuditEvent.objects.count()
    client = as_user(everyone.get(actor))
    response = client.generic(
        method,
        url,
        None if body is None else json.dumps(body),
        content_type="application/json",
        HTTP_X_REQUEST_ID="req-audit-1",
    )
    assert response.status_code < 300, response.content
    assert AuditEvent.objects.count() == before + 1
    event = AuditEvent.objects.latest("id")
    assert event.action == action
    assert event.request_id == "req-audit-1"
    assert event.tenant_slug == (tenant or "")
    expected_actor = "bob" if actor == "anon" else actor
    assert event.actor_name == expected_actor and event.actor is not None
    assert event.object_id
    assert "password" not in str(event.data)


def test_token_revoke_is_audited(bob: Any) -> None:
    _, key = AuthToken.objects.create(user=bob)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert client.delete("/api/v1/auth/token/").status_code == 204
    assert AuditEvent.objects.get().action == "token.revoke"


def test_flavor_delete_is_audited(root: Any, as_user: Any, h100: Any) -> None:
    from tests.factories import GpuFlavorFactory

    GpuFlavorFactory(name="spare")
    assert as_user(root).delete("/api/v1/flavors/spare/").status_code == 204
    assert AuditEvent.objects.get().action == "flavor.delete"


def test_quota_set_replaces_the_set_and_records_before_and_after(
    root: Any, acme: Any, as_user: Any
) -> None:
    line = {"flavor": "l4", "gpus": 3, "borrow_limit": 1, "lend_limit": 2}
    body = {"flavors": [line], "cpu": 5, "memory_gib": 6}
    response = as_user(root).put("/api/v1/tenants/acme/quotas/", body)
    assert response.status_code == 200
    assert response.json() == {**body}
    assert Quota.objects.get(tenant=acme).lend_limit == 2
    assert list(Quota.objects.filter(tenant=acme).values_list("flavor__name", "gpus")) == [
        ("l4", 3)
    ]
    event = AuditEvent.objects.get(action="quota.set")
    assert event.data["before"]["flavors"][0] == {
        "flavor": "h100",
        "gpus": 16,
        "borrow_limit": 8,
        "lend_limit": None,
    }
    assert event.data["after"] == body


def test_audit_visibility_and_filters(everyone: Any, as_user: Any) -> None:
    root, alice = everyone["root"], everyone["alice"]
    as_user(root).patch("/api/v1/tenants/acme/", {"name": "Acme 2"})
    as_user(root).patch("/api/v1/tenants/globex/", {"name": "Globex 2"})
    as_user(root).post(
        "/api/v1/flavors/",
        {
            "name": "a10",
            "gpu_product": "NVIDIA-A10",
            "gpus_per_node": 4,
            "cpu_per_node": 64,
            "memory_per_node_gib": 256,
        },
    )

    def tenants(user: Any, query: str = "") -> list[str]:
        data = as_user(user).get(f"/api/v1/audit/{query}").json()
        return sorted(row["tenant"] for row in data["results"])

    assert tenants(root) == ["", "acme", "globex"]
    assert tenants(alice) == ["acme"]  # tenant admins: their tenants only
    assert tenants(everyone["bob"]) == []  # engineers and viewers: nothing
    assert tenants(root, "?tenant=globex") == ["globex"]
    assert tenants(root, "?action=flavor.create") == [""]
    assert tenants(root, "?actor=alice") == []
    assert tenants(root, "?since=2999-01-01T00:00:00Z") == []
    assert len(tenants(root, "?until=2999-01-01T00:00:00Z")) == 3


# --- Members ------------------------------------------------------------------------


def test_removing_the_last_admin_is_a_conflict(alice: Any, root: Any, as_user: Any) -> None:
    response = as_user(root).delete("/api/v1/tenants/acme/members/alice/")
    assert response.status_code == 409
    assert "last admin" in response.json()["error"]["message"]
    assert Membership.objects.filter(user=alice).exists()


def test_an_admin_may_leave_when_another_admin_remains(alice: Any, acme: Any, as_user: Any) -> None:
    MembershipFactory(tenant=acme, user=UserFactory(username="ann"), role=Role.ADMIN)
    assert as_user(alice).delete("/api/v1/tenants/acme/members/alice/").status_code == 204
    # alice is no longer a member: acme is now invisible to her.
    assert as_user(alice).get("/api/v1/tenants/acme/").status_code == 404


def test_tenant_admin_may_grant_up_to_admin(alice: Any, charlie: Any, as_user: Any) -> None:
    response = as_user(alice).post(
        "/api/v1/tenants/acme/members/", {"username": "charlie", "role": "admin"}
    )
    assert response.status_code == 201
    assert response.json()["role"] == "admin"


def test_a_role_cannot_grant_more_than_its_own() -> None:
    assert role_may_grant(granter_role=Role.ADMIN, role=Role.ADMIN)
    assert role_may_grant(granter_role=Role.ENGINEER, role=Role.VIEWER)
    assert not role_may_grant(granter_role=Role.ENGINEER, role=Role.ADMIN)
    assert not role_may_grant(granter_role=Role.VIEWER, role=Role.ENGINEER)


def test_member_of_another_tenant_is_404(alice: Any, charlie: Any, as_user: Any) -> None:
    # charlie exists, but not in acme: removing him there is "not found".
    assert as_user(alice).delete("/api/v1/tenants/acme/members/charlie/").status_code == 404


# --- Catalogue, tenants, users ------------------------------------------------------


def test_deleting_a_flavor_in_use_is_a_conflict(root: Any, acme: Any, as_user: Any) -> None:
    response = as_user(root).delete("/api/v1/flavors/h100/")
    assert response.status_code == 409
    assert response.json()["error"]["message"] == (
        "Flavor h100 is still used by 1 quota(s) and 0 cluster request(s); remove those first."
    )
    assert AuditEvent.objects.count() == 0


def test_tenant_namespace_defaults_to_prefix_plus_slug(
    root: Any, as_user: Any, settings: Any
) -> None:
    settings.TENANT_NAMESPACE_PREFIX = "team-"
    response = as_user(root).post("/api/v1/tenants/", {"slug": "initech", "name": "Initech"})
    assert response.json()["namespace"] == "team-initech"


def test_tenant_policy_patch_changes_one_field(root: Any, acme: Any, as_user: Any) -> None:
    response = as_user(root).patch("/api/v1/tenants/acme/", {"policy": {"dev_ttl_hours": 12}})
    assert response.status_code == 200
    assert response.json()["policy"] == {
        "max_dev_clusters_per_user": 2,
        "max_dev_gpus_per_user": 2,
        "dev_ttl_hours": 12,
        "max_ttl_hours": 72,
        "idle_suspend_minutes": 60,
        "idle_suspend_prod": False,
        "idle_gpu_util_percent": 0,
        "monthly_gpu_hour_budget": None,
        "allow_pip_direct_urls": False,
    }


def test_user_create_never_returns_the_password(root: Any, as_user: Any) -> None:
    response = as_user(root).post(
        "/api/v1/users/",
        {"username": "zed", "email": "z@example.com", "password": "a-long-unusual-pass-42"},
    )
    assert response.status_code == 201
    assert "password" not in response.json()
    assert (
        APIClient()
        .post("/api/v1/auth/token/", {"username": "zed", "password": "a-long-unusual-pass-42"})
        .status_code
        == 200
    )


def test_me_lists_memberships(alice: Any, as_user: Any) -> None:
    body = as_user(alice).get("/api/v1/users/me/").json()
    assert body["memberships"] == [
        {"tenant": "acme", "tenant_name": "Acme Research", "role": "admin", "source": "local"}
    ]


def test_tenant_list_shows_only_own_tenants(alice: Any, charlie: Any, as_user: Any) -> None:
    slugs = [t["slug"] for t in as_user(alice).get("/api/v1/tenants/").json()["results"]]
    assert slugs == ["acme"]


def test_a_flavor_may_say_its_node_group_can_grow(root: Any, as_user: Any, h100: Any) -> None:
    client = as_user(root)
    body = {
        "name": "a100",
        "gpu_product": "NVIDIA-A100-SXM4-80GB",
        "gpus_per_node": 8,
        "cpu_per_node": 96,
        "memory_per_node_gib": 1000,
        "node_count": 2,
        "max_node_count": 6,
    }
    created = client.post("/api/v1/flavors/", body, format="json")
    assert created.status_code == 201, created.content
    assert created.json()["max_node_count"] == 6
    flavor = GpuFlavor.objects.get(name="a100")
    assert flavor.can_grow and flavor.max_gpus == 48 and flavor.total_gpus == 16
    # Never below the nodes it has: refused, naming the field, and nothing changes.
    shrink = client.patch("/api/v1/flavors/a100/", {"max_node_count": 1}, format="json")
    assert shrink.status_code == 400
    assert "max_node_count" in shrink.json()["error"]["fields"]
    grow = client.patch("/api/v1/flavors/a100/", {"node_count": 7}, format="json")
    assert grow.status_code == 400 and "max_node_count" in grow.json()["error"]["fields"]
    assert GpuFlavor.objects.get(name="a100").node_count == 2
    unset = client.patch("/api/v1/flavors/a100/", {"max_node_count": None}, format="json")
    assert unset.status_code == 200 and not GpuFlavor.objects.get(name="a100").can_grow


def test_a_tenant_admin_sets_the_tenants_policy_within_the_platforms_limits(
    acme: Any, alice: Any, bob: Any, as_user: Any
) -> None:
    url = "/api/v1/tenants/acme/policy/"
    assert as_user(bob).get(url).json()["idle_suspend_minutes"] == acme.idle_suspend_minutes
    assert as_user(bob).patch(url, {"max_dev_clusters_per_user": 9}).status_code == 403
    platform_only = as_user(alice).patch(url, {"max_ttl_hours": 999})
    assert platform_only.status_code == 400
    assert platform_only.json()["error"]["fields"] == {"max_ttl_hours": ["Unknown field."]}
    too_long = as_user(alice).patch(url, {"dev_ttl_hours": acme.max_ttl_hours + 1})
    assert too_long.status_code == 400 and "dev_ttl_hours" in too_long.json()["error"]["fields"]
    ok = as_user(alice).patch(url, {"max_dev_clusters_per_user": 2, "idle_suspend_prod": True})
    assert ok.status_code == 200
    assert ok.json()["max_dev_clusters_per_user"] == 2 and ok.json()["idle_suspend_prod"] is True
    event = AuditEvent.objects.get(action="tenant.policy")
    assert event.actor_name == "alice"
    assert event.data["after"] == {"idle_suspend_prod": True, "max_dev_clusters_per_user": 2}


def test_a_members_role_changes_through_the_api_and_is_audited(
    acme: Any, alice: Any, bob: Any, as_user: Any
) -> None:
    url = "/api/v1/tenants/acme/members/"
    changed = as_user(alice).patch(url + "bob/", {"role": "viewer"})
    assert changed.status_code == 200 and changed.json()["role"] == "viewer"
    assert AuditEvent.objects.get(action="membership.role").data == {
        "username": "bob",
        "before": "engineer",
        "after": "viewer",
    }
    last = as_user(alice).patch(url + "alice/", {"role": "engineer"})
    assert last.status_code == 409
    assert Membership.objects.get(user=alice).role == Role.ADMIN
    assert as_user(bob).patch(url + "bob/", {"role": "admin"}).status_code == 403


def test_a_mig_flavor_is_added_through_the_api_and_a_bad_selector_is_a_400(
    root: Any, as_user: Any
) -> None:
    client = as_user(root)
    body = {
        "name": "h100-1g",
        "gpu_product": "NVIDIA-H100-80GB-HBM3",
        "gpus_per_node": 56,
        "cpu_per_node": 192,
        "memory_per_node_gib": 1800,
        "device_mode": "mig",
        "mig_profile": "1g.10gb",
    }
    bad = client.post(
        "/api/v1/flavors/", {**body, "device_selector": "device.attributes["}, format="json"
    )
    assert bad.status_code == 400, bad.content
    assert "does not compile" in str(bad.json()["error"]["fields"]["device_selector"])
    assert not GpuFlavor.objects.filter(name="h100-1g").exists()
    created = client.post("/api/v1/flavors/", body, format="json")
    assert created.status_code == 201, created.content
    out = created.json()
    assert out["device_mode"] == "mig" and out["mig_profile"] == "1g.10gb"
    assert out["devices_in_words"] == "MIG 1g.10gb partitions (DRA, mig.nvidia.com)"
    listed = {f["name"]: f for f in client.get("/api/v1/flavors/").json()["results"]}
    assert listed["h100-1g"]["device_class"] == ""  # the mode's default class applies


def test_under_kueue_the_api_refuses_a_second_mig_profile_on_one_class(
    everyone: Any, as_user: Any, settings: Any
) -> None:
    settings.QUEUE_MODE = "kueue"
    body = {
        "gpu_product": "NVIDIA-H100-80GB-HBM3",
        "gpus_per_node": 56,
        "cpu_per_node": 192,
        "memory_per_node_gib": 1800,
        "device_mode": "mig",
    }
    client = as_user(everyone["root"])
    made = client.post("/api/v1/flavors/", {**body, "name": "h100-1g", "mig_profile": "1g.10gb"})
    assert made.status_code == 201, made.content
    refused = client.post("/api/v1/flavors/", {**body, "name": "h100-3g", "mig_profile": "3g.40gb"})
    assert refused.status_code == 400
    assert "kubernetes-sigs/kueue#10108" in str(refused.json())
    assert "mig_profile" in str(refused.json())
    assert client.get("/api/v1/flavors/h100-3g/").status_code == 404
