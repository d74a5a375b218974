"""Priority classes through the API: platform admins add, change and remove them; a
tenant's members see the ones they may pick; clashes are clear 400s that change nothing."""

from __future__ import annotations

from typing import Any

import pytest

from tenants.models import AuditEvent, PriorityClass
from tenants.selectors import default_priority_class, priority_classes_for

URL = "/api/v1/platform/priority-classes/"


@pytest.fixture(autouse=True)
def no_seeded_classes(db: Any) -> None:
    """Start from no class (the seeded ones may or may not be there)."""
    PriorityClass.objects.all().delete()


def test_a_platform_admin_adds_changes_and_removes_a_class(
    as_user: Any, root: Any, acme: Any, globex: Any
) -> None:
    client = as_user(root)
    made = client.post(
        URL,
        {
            "name": "urgent",
            "value": 1000,
            "description": "Deadlines.",
            "may_preempt": True,
            "min_run_seconds": 600,
            "notice_seconds": 300,
            "tenants": ["acme"],
        },
        format="json",
    )
    assert made.status_code == 201, made.json()
    body = made.json()
    assert body["tenants"] == ["acme"]
    assert body["may_preempt"] is True and body["notice_seconds"] == 300
    assert body["is_default"] is False and body["checkpoint_grace_seconds"] == 0

    changed = client.patch(URL + "urgent/", {"tenants": [], "value": 900}, format="json")
    assert changed.status_code == 200, changed.json()
    assert changed.json()["tenants"] == [] and changed.json()["value"] == 900
    put = client.put(URL + "urgent/", {"value": 950, "description": "x"}, format="json")
    assert put.status_code == 200, put.json()
    assert [c["name"] for c in client.get(URL).json()] == ["urgent"]
    assert client.get(URL + "urgent/").json()["value"] == 950

    assert client.delete(URL + "urgent/").status_code == 204
    assert not PriorityClass.objects.exists()
    actions = list(
        AuditEvent.objects.filter(action__startswith="priority_class.")
        .order_by("pk")
        .values_list("action", flat=True)
    )
    assert actions == [
        "priority_class.create",
        "priority_class.update",
        "priority_class.update",
        "priority_class.delete",
    ]


def test_clashes_are_clear_400s_that_change_nothing(as_user: Any, root: Any) -> None:
    client = as_user(root)
    assert client.post(URL, {"name": "normal", "value": 0, "is_default": True}).status_code == 201
    before = list(PriorityClass.objects.values())
    audits = AuditEvent.objects.count()

    same_name = client.post(URL, {"name": "normal", "value": 5}, format="json")
    assert same_name.status_code == 400
    assert same_name.json()["error"]["fields"]["name"] == [
        "A priority class named 'normal' already exists."
    ]
    same_value = client.post(URL, {"name": "other", "value": 0}, format="json")
    assert same_value.status_code == 400
    assert (
        "Priority class normal already has value 0"
        in (same_value.json()["error"]["fields"]["value"][0])
    )
    second_default = client.post(
        URL, {"name": "other", "value": 1, "is_default": True}, format="json"
    )
    assert second_default.status_code == 400
    assert second_default.json()["error"]["fields"]["is_default"][0].startswith(
        "normal is the default class"
    )
    for bad in (
        {"name": "Not A Label", "value": 1},
        {"name": "x", "value": 2_000_000},
        {"name": "x", "value": "1"},
        {"name": "x", "value": 1, "tenants": ["nobody"]},
        {"name": "x", "value": 1, "colour": "red"},
        {"name": "x", "value": 1, "notice_seconds": 100_000},
    ):
        refused = client.post(URL, bad, format="json")
        assert refused.status_code == 400, (bad, refused.json())
    renamed = client.patch(URL + "normal/", {"name": "plain"}, format="json")
    assert renamed.status_code == 400
    assert list(PriorityClass.objects.values()) == before
    assert AuditEvent.objects.count() == audits


def test_only_platform_admins_see_or_change_classes(
    as_user: Any, alice: Any, root: Any, acme: Any
) -> None:
    PriorityClass.objects.create(name="normal", value=0)
    client = as_user(alice)  # a tenant admin, not a platform admin
    assert client.get(URL).status_code == 403
    assert client.post(URL, {"name": "mine", "value": 7}, format="json").status_code == 403
    assert client.delete(URL + "normal/").status_code == 403
    assert as_user(root).get(URL + "nothing/").status_code == 404
    assert PriorityClass.objects.count() == 1


def test_members_see_the_classes_their_tenant_may_pick(
    as_user: Any, vera: Any, charlie: Any, acme: Any, globex: Any
) -> None:
    normal = PriorityClass.objects.create(name="normal", value=0, is_default=True)
    mine = PriorityClass.objects.create(name="acme-rush", value=500, may_preempt=True)
    mine.tenants.set([acme])
    theirs = PriorityClass.objects.create(name="globex-rush", value=600)
    theirs.tenants.set([globex])
    listed = as_user(vera).get("/api/v1/tenants/acme/priority-classes/")
    assert listed.status_code == 200
    assert [c["name"] for c in listed.json()] == ["acme-rush", "normal"]
    assert "tenants" not in listed.json()[0]
    assert [c.name for c in priority_classes_for(globex)] == ["globex-rush", "normal"]
    assert default_priority_class() == normal
    assert as_user(charlie).get("/api/v1/tenants/acme/priority-classes/").status_code == 404
