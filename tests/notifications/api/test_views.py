"""The notifications API: preferences, the delivery log, tenant webhooks (admins only,
another tenant's a 404, the secret shown once), validation that changes nothing."""

from __future__ import annotations

from typing import Any

import pytest

from notifications.models import NotificationProfile, TenantWebhook
from tenants.models import AuditEvent

pytestmark = pytest.mark.django_db

HOOKS = "/api/v1/tenants/acme/webhooks/"
PREFS = "/api/v1/notifications/preferences/"


def test_the_secret_is_shown_once_and_audited(as_user: Any, alice: Any) -> None:
    api = as_user(alice)
    made = api.post(
        HOOKS,
        {"name": "ops", "url": "https://hooks.example.com/x", "kinds": ["failed", "cluster_ready"]},
    )
    assert made.status_code == 201, made.content
    secret = made.json()["secret"]
    assert secret.startswith("whsec_") and len(secret) > 40
    assert made["Cache-Control"] == "no-store"
    assert made.json()["kinds"] == ["cluster_ready", "failed"]
    listed = api.get(HOOKS)
    assert listed.status_code == 200
    assert secret not in listed.content.decode()
    assert "secret" not in listed.json()["results"][0]
    hook = TenantWebhook.objects.get()
    assert hook.secret == secret
    audit = AuditEvent.objects.get(action="webhook.create")
    assert secret not in str(audit.data) and "/x" not in str(audit.data)
    assert api.delete(f"{HOOKS}{hook.pk}/").status_code == 204
    assert AuditEvent.objects.filter(action="webhook.delete").count() == 1
    assert not TenantWebhook.objects.exists()


def test_members_who_are_not_admins_and_other_tenants(
    as_user: Any, alice: Any, bob: Any, vera: Any, charlie: Any
) -> None:
    hook = TenantWebhook.objects.create(
        tenant=alice.memberships.get().tenant,
        url="https://h.example.com/",
        kinds=["failed"],
        secret="whsec_s",
    )
    body = {"url": "https://hooks.example.com/x", "kinds": ["failed"]}
    for user in (bob, vera):
        api = as_user(user)
        assert api.get(HOOKS).status_code == 403
        assert api.post(HOOKS, body).status_code == 403
        assert api.delete(f"{HOOKS}{hook.pk}/").status_code == 403
        assert api.post(f"{HOOKS}{hook.pk}/test/").status_code == 403
    outsider = as_user(charlie)
    for response in (
        outsider.get(HOOKS),
        outsider.post(HOOKS, body),
        outsider.delete(f"{HOOKS}{hook.pk}/"),
        outsider.post(f"{HOOKS}{hook.pk}/test/"),
    ):
        assert response.status_code == 404
    # charlie's own tenant cannot reach acme's webhook by id either.
    as_user(charlie).delete(f"/api/v1/tenants/globex/webhooks/{hook.pk}/")
    assert TenantWebhook.objects.count() == 1


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"url": "ftp://hooks.example.com/x", "kinds": ["failed"]}, "url"),
        ({"url": "javascript:alert(1)", "kinds": ["failed"]}, "url"),
        ({"url": "https://user:pw@hooks.example.com/", "kinds": ["failed"]}, "url"),
        ({"url": "https://hooks.example.com/" + "a" * 600, "kinds": ["failed"]}, "url"),
        ({"url": "https://hooks.example.com/x", "kinds": ["nope"]}, "kinds"),
        ({"url": "https://hooks.example.com/x", "kinds": []}, "kinds"),
        ({"url": "https://hooks.example.com/x", "kinds": ["failed"], "secret": "mine"}, "secret"),
    ],
)
def test_bad_webhooks_are_a_400_and_change_nothing(
    as_user: Any, alice: Any, body: dict[str, Any], field: str
) -> None:
    response = as_user(alice).post(HOOKS, body)
    assert response.status_code == 400, response.content
    assert any(key.split(".")[0] == field for key in response.json()["error"]["fields"])
    assert not TenantWebhook.objects.exists()
    assert not AuditEvent.objects.filter(action="webhook.create").exists()


@pytest.mark.parametrize("value", [0, 0.0, 1, "true", "no", []])
def test_a_preference_is_a_json_boolean_only(as_user: Any, bob: Any, value: Any) -> None:
    # The schema fuzzer found `"email": 0.0` taken as false (DRF's BooleanField takes
    # numbers and words); the schema says boolean, so anything else is a 400 that names it.
    line = {"kind": "failed", "email": value, "webhook": False}
    response = as_user(bob).put(PREFS, {"preferences": [line]}, format="json")
    assert response.status_code == 400, response.content
    assert "true or false" in str(response.json())
    assert NotificationProfile.objects.filter(user=bob).count() <= 1
    got = as_user(bob).get(PREFS).json()
    assert next(x for x in got["preferences"] if x["kind"] == "failed")["email"] is True


def test_preferences_read_and_replace(as_user: Any, bob: Any) -> None:
    api = as_user(bob)
    got = api.get(PREFS).json()
    assert got["email"] == "bob@example.com" and got["webhook_url"] == ""
    assert {line["kind"] for line in got["preferences"]} == {
        "cluster_ready",
        "expiring_soon",
        "idle_warning",
        "reclaim_warning",
        "preemption_notice",
        "preempted",
        "held",
        "pods_failing",
        "suspended",
        "failed",
        "job_finished",
        "member_drain",
        "cost_cap",
    }
    assert all(line["email"] for line in got["preferences"])
    put = api.put(
        PREFS,
        {
            "webhook_url": "https://me.example.com/hook",
            "preferences": [{"kind": "failed", "email": False, "webhook": True}],
        },
    )
    assert put.status_code == 200, put.content
    secret = put.json()["webhook_secret"]
    assert secret == NotificationProfile.objects.get(user=bob).webhook_secret
    again = api.get(PREFS).json()
    assert "webhook_secret" not in again and secret not in str(again)
    assert next(line for line in again["preferences"] if line["kind"] == "failed")["email"] is False
    # The same URL again: no new secret.
    same = api.put(PREFS, {"webhook_url": "https://me.example.com/hook", "preferences": []})
    assert "webhook_secret" not in same.json()
    bad = api.put(
        PREFS,
        {
            "webhook_url": "file:///etc/passwd",
            "preferences": [{"kind": "cluster_ready", "email": False, "webhook": False}],
        },
    )
    assert bad.status_code == 400
    assert "webhook_url" in bad.json()["error"]["fields"]
    # Nothing of the refused body was kept.
    after = api.get(PREFS).json()
    assert after["webhook_url"] == "https://me.example.com/hook"
    assert next(p for p in after["preferences"] if p["kind"] == "cluster_ready")["email"] is True


def test_the_delivery_log_is_the_callers_own(as_user: Any, alice: Any, bob: Any) -> None:
    from notifications import services

    hook, _ = services.tenant_webhook_create(
        actor=alice,
        tenant=alice.memberships.get().tenant,
        url="https://h.example.com/",
        kinds=["failed"],
    )
    services.tenant_webhook_test(actor=alice, webhook=hook)
    assert as_user(bob).get("/api/v1/notifications/deliveries/").json()["results"] == []
    rows = as_user(alice).get(f"{HOOKS}deliveries/").json()["results"]
    assert [r["kind"] for r in rows] == ["test"]


def test_the_logs_cost_a_fixed_number_of_queries(
    as_user: Any, alice: Any, django_assert_max_num_queries: Any
) -> None:
    from notifications import services

    tenant = alice.memberships.get().tenant
    hook, _ = services.tenant_webhook_create(
        actor=alice, tenant=tenant, url="https://h.example.com/", kinds=["failed"]
    )
    api = as_user(alice)
    services.tenant_webhook_test(actor=alice, webhook=hook)
    with django_assert_max_num_queries(8) as few:
        assert len(api.get(f"{HOOKS}deliveries/").json()["results"]) == 1
    for _ in range(20):
        services.tenant_webhook_test(actor=alice, webhook=hook)
    with django_assert_max_num_queries(len(few.captured_queries)):
        assert len(api.get(f"{HOOKS}deliveries/").json()["results"]) == 21
    with django_assert_max_num_queries(8):
        api.get("/api/v1/notifications/deliveries/")
        api.get(HOOKS)
