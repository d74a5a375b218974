"""Bad input is a 400 naming the field, and writes nothing (not even an audit row)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tenants.models import AuditEvent
from tests.tenants.conftest import row_counts

T = "/api/v1/tenants/"
F = "/api/v1/flavors/"
M = "/api/v1/tenants/acme/members/"
Q = "/api/v1/tenants/acme/quotas/"
U = "/api/v1/users/"
GOOD_FLAVOR = {
    "name": "a10",
    "gpu_product": "NVIDIA-A10",
    "gpus_per_node": 4,
    "cpu_per_node": 64,
    "memory_per_node_gib": 256,
}
GOOD_QUOTA = {"flavors": [{"flavor": "h100", "gpus": 8}], "cpu": 10, "memory_gib": 10}


def flavor(**changes: Any) -> dict[str, Any]:
    return {**GOOD_FLAVOR, **changes}


def quota(**changes: Any) -> dict[str, Any]:
    return {**GOOD_QUOTA, **changes}


# (actor, method, url, body, field that must be named)
CASES = [
    # Tenants: malformed slugs and names, absurd numbers, wrong types, unknown fields.
    ("root", "POST", T, {"slug": "Bad_Slug", "name": "x"}, "slug"),
    ("root", "POST", T, {"slug": "a" * 41, "name": "x"}, "slug"),
    ("root", "POST", T, {"slug": "-lead", "name": "x"}, "slug"),
    ("root", "POST", T, {"slug": "ok", "name": ""}, "name"),
    ("root", "POST", T, {"slug": "ok", "name": "n" * 101}, "name"),
    ("root", "POST", T, {"slug": "acme", "name": "Again"}, "slug"),
    ("root", "POST", T, {"slug": "ok", "name": "x", "weight": -1}, "weight"),
    ("root", "POST", T, {"slug": "ok", "name": "x", "weight": 1e9}, "weight"),
    ("root", "POST", T, {"slug": "ok", "name": "x", "cpu_quota": "lots"}, "cpu_quota"),
    ("root", "POST", T, {"slug": "ok", "name": "x", "cpu_quota": -5}, "cpu_quota"),
    (
        "root",
        "POST",
        T,
        {"slug": "ok", "name": "x", "memory_quota_gib": 10**12},
        "memory_quota_gib",
    ),
    ("root", "POST", T, {"slug": "ok", "name": "x", "namespace": "Not A Namespace"}, "namespace"),
    ("root", "POST", T, {"slug": "ok", "name": "x", "tenant": "globex"}, "tenant"),
    (
        "root",
        "POST",
        T,
        {"slug": "ok", "name": "x", "policy": {"dev_ttl_hours": 0}},
        "policy.dev_ttl_hours",
    ),
    (
        "root",
        "POST",
        T,
        {"slug": "ok", "name": "x", "policy": {"dev_ttl_hours": 100, "max_ttl_hours": 50}},
        "policy.dev_ttl_hours",
    ),
    ("root", "POST", T, {"slug": "ok", "name": "x", "policy": {"ttl": 5}}, "policy.ttl"),
    ("root", "POST", T, {"slug": "ok", "name": "x", "policy": "strict"}, "policy.non_field_errors"),
    ("root", "POST", T, ["slug", "ok"], "non_field_errors"),
    ("root", "PATCH", T + "acme/", {"slug": "acme2"}, "slug"),
    ("root", "PATCH", T + "acme/", {"namespace": "elsewhere"}, "namespace"),
    ("root", "PATCH", T + "acme/", {"weight": "heavy"}, "weight"),
    ("root", "PATCH", T + "acme/", {"created_at": "2020-01-01T00:00:00Z"}, "created_at"),
    # Flavors.
    ("root", "POST", F, flavor(name="H100!"), "name"),
    ("root", "POST", F, flavor(name="h100"), "name"),
    ("root", "POST", F, flavor(gpus_per_node=0), "gpus_per_node"),
    ("root", "POST", F, flavor(gpus_per_node=-1), "gpus_per_node"),
    ("root", "POST", F, flavor(memory_per_node_gib=10**9), "memory_per_node_gib"),
    ("root", "POST", F, flavor(gpu_product="has space"), "gpu_product"),
    ("root", "POST", F, flavor(sharing="maybe"), "sharing"),
    ("root", "POST", F, flavor(cpu_per_node="many"), "cpu_per_node"),
    ("root", "POST", F, flavor(price=3), "price"),
    ("root", "PATCH", F + "h100/", {"name": "h200"}, "name"),
    ("root", "PATCH", F + "h100/", {"node_count": -5}, "node_count"),
    # Members.
    ("alice", "POST", M, {"username": "nobody", "role": "viewer"}, "username"),
    ("alice", "POST", M, {"username": "bob", "role": "viewer"}, "username"),
    ("alice", "POST", M, {"username": "charlie", "role": "owner"}, "role"),
    ("alice", "POST", M, {"username": "charlie"}, "role"),
    ("alice", "POST", M, {"username": "charlie", "role": "viewer", "tenant": "globex"}, "tenant"),
    ("alice", "POST", M, {"username": ["charlie"], "role": "viewer"}, "username"),
    # Quotas: unknown flavors, negative and absurd numbers, duplicates, wrong types.
    ("root", "PUT", Q, quota(flavors=[{"flavor": "tpu", "gpus": 1}]), "flavors.0.flavor"),
    ("root", "PUT", Q, quota(flavors=[{"flavor": "h100", "gpus": -1}]), "flavors.0.gpus"),
    ("root", "PUT", Q, quota(flavors=[{"flavor": "h100", "gpus": 10**9}]), "flavors.0.gpus"),
    (
        "root",
        "PUT",
        Q,
        quota(flavors=[{"flavor": "h100", "gpus": 1, "borrow_limit": -2}]),
        "flavors.0.borrow_limit",
    ),
    (
        "root",
        "PUT",
        Q,
        quota(flavors=[{"flavor": "h100", "gpus": 4, "lend_limit": 5}]),
        "flavors.0.lend_limit",
    ),
    (
        "root",
        "PUT",
        Q,
        quota(flavors=[{"flavor": "l4", "gpus": 1}, {"flavor": "l4", "gpus": 2}]),
        "flavors.1.flavor",
    ),
    ("root", "PUT", Q, quota(flavors=[{"flavor": "h100", "gpu": 1}]), "flavors.0.gpu"),
    ("root", "PUT", Q, quota(flavors="h100"), "flavors.non_field_errors"),
    ("root", "PUT", Q, quota(cpu="x"), "cpu"),
    ("root", "PUT", Q, {"flavors": []}, "cpu"),
    ("root", "PUT", Q, quota(tenant="globex"), "tenant"),
    # Users.
    (
        "root",
        "POST",
        U,
        {"username": "zed", "email": "z@example.com", "password": "zed"},
        "password",
    ),
    (
        "root",
        "POST",
        U,
        {"username": "alice", "email": "a@example.com", "password": "a-long-unusual-pass-42"},
        "username",
    ),
    (
        "root",
        "POST",
        U,
        {"username": "has space", "email": "a@example.com", "password": "a-long-unusual-pass-42"},
        "username",
    ),
    (
        "root",
        "POST",
        U,
        {"username": "zed", "email": "not-an-email", "password": "a-long-unusual-pass-42"},
        "email",
    ),
    ("anon", "POST", "/api/v1/auth/token/", {"username": "bob"}, "password"),
]


@pytest.mark.parametrize(
    ("actor", "method", "url", "body", "field"),
    CASES,
    ids=[f"{c[1]} {c[2]} {c[4]}" for c in CASES],
)
def test_bad_input_is_400_and_writes_nothing(
    everyone: Any, as_user: Any, actor: str, method: str, url: str, body: Any, field: str
) -> None:
    before = row_counts()
    client = as_user(everyone.get(actor))
    response = client.generic(method, url, json.dumps(body), content_type="application/json")
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "invalid"
    assert field in error["fields"], error
    assert row_counts() == before


def test_a_wrong_password_is_400_and_writes_only_its_audit_row(everyone: Any, as_user: Any) -> None:
    # A failed sign-in is audited (tenants/lockout.py); nothing else changes.
    before = row_counts()
    body = {"username": "bob", "password": "wrong"}
    response = as_user(None).post("/api/v1/auth/token/", body, format="json")
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "invalid" and "non_field_errors" in error["fields"]
    after = row_counts()
    assert after.pop("audit") == before.pop("audit") + 1
    assert after == before
    assert AuditEvent.objects.get().action == "sign_in.failed"


def test_oversized_body_is_413_and_writes_nothing(everyone: Any, as_user: Any) -> None:
    # 413 rather than 400: it is the status HTTP defines for a body over the limit.
    before = row_counts()
    body = json.dumps({"slug": "big", "name": "x" * (300 * 1024)})
    response = as_user(everyone["root"]).generic("POST", T, body, content_type="application/json")
    assert response.status_code == 413
    assert response.json() == {
        "error": {"code": "too_large", "message": "The request body is too large."}
    }
    assert row_counts() == before


def test_malformed_json_is_400(everyone: Any, as_user: Any) -> None:
    before = row_counts()
    response = as_user(everyone["root"]).generic(
        "POST", T, "{not json", content_type="application/json"
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "parse_error"
    assert row_counts() == before
