"""The Django admin is a read-only window: no write through it escapes the services.

Every model registered in the admin (ours, Django's users and groups, knox's tokens) is
covered by iterating the registry, so a model registered later is covered too: a POST to
its add, change and delete views and a bulk delete from its list are refused and change
no row and write no audit event, while its pages still render, with a note that says
where changes are made.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib import admin
from django.contrib.auth.models import Group
from django.db import models
from django.forms.models import model_to_dict
from django.test import Client, RequestFactory
from django.urls import reverse

from controlplane.admin_site import READ_ONLY_NOTE
from tenants import services
from tenants.models import AuditEvent, ExternalIdentity, Role, Tenant

# What an attacker would change through each model's change form, beyond its current
# values (the defects of issue 10: slug and namespace moved, a role raised).
CHANGES: dict[str, dict[str, Any]] = {
    "tenants.tenant": {"slug": "acme2", "namespace": "kube-system"},
    "tenants.membership": {"role": Role.ADMIN},
    "auth.user": {"is_staff": "on", "is_superuser": "on"},
    "tenants.externalidentity": {"subject": "someone-else"},
}


@pytest.fixture
def populated(alice: Any, bob: Any, charlie: Any, root: Any) -> dict[str, Any]:
    """At least one row of every model the admin shows."""
    acme = Tenant.objects.get(slug="acme")
    services.tenant_update(actor=root, tenant=acme, changes={"weight": 2})
    services.token_issue(user=root)
    Group.objects.create(name="operators")
    ExternalIdentity.objects.create(
        user=bob, issuer="https://sso.example", subject="b0b", groups=["gpu-acme-engineers"]
    )
    return {"alice": alice, "bob": bob, "charlie": charlie}


def _snapshot() -> dict[str, Any]:
    return {
        model._meta.label: list(model._default_manager.order_by("pk").values())
        for model in admin.site._registry
    } | {"audit": AuditEvent.objects.count()}


def _url(model: type[models.Model], view: str, *args: Any) -> str:
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_{view}", args=args)


def _change_payload(model_admin: Any, obj: models.Model, rf: RequestFactory, root: Any) -> dict:
    """A complete change-form body: every field at its current value plus the changes in
    :data:`CHANGES`, and empty management forms for the inlines (so the form is valid)."""
    data: dict[str, Any] = {}
    for name, value in model_to_dict(obj).items():
        if value is None or isinstance(value, list | tuple):
            continue
        if isinstance(value, bool):
            if value:
                data[name] = "on"
            continue
        data[name] = value.pk if isinstance(value, models.Model) else value
    data.update(CHANGES.get(model_admin.model._meta.label_lower, {}))
    request = rf.get("/")
    request.user = root
    for inline in model_admin.inlines:
        formset = inline(model_admin.model, admin.site).get_formset(request, obj)
        prefix = formset.get_default_prefix()
        data.update({f"{prefix}-TOTAL_FORMS": "0", f"{prefix}-INITIAL_FORMS": "0"})
    return data


def test_every_registered_model_is_read_only_in_the_admin(populated: Any, root: Any) -> None:
    client = Client()
    client.force_login(root)
    rf = RequestFactory()
    registered = list(admin.site._registry.items())
    assert {m._meta.label for m, _ in registered} >= {"tenants.Tenant", "tenants.Membership"}
    for model, model_admin in registered:
        # The newest row: the engineer's membership, a user other than the actor.
        obj = model._default_manager.exclude(pk=root.pk if model is type(root) else None)
        obj = obj.order_by("-pk").first()
        assert obj is not None, f"give the fixture a {model._meta.label} row"
        before = _snapshot()
        label = model._meta.label

        assert client.get(_url(model, "changelist")).status_code == 200, label
        page = client.get(_url(model, "change", obj.pk))
        assert page.status_code == 200, label
        assert READ_ONLY_NOTE in page.content.decode(), label

        payload = _change_payload(model_admin, obj, rf, root)
        attempts = [
            ("change", client.post(_url(model, "change", obj.pk), payload)),
            ("add", client.post(_url(model, "add"), payload)),
            ("delete", client.post(_url(model, "delete", obj.pk), {"post": "yes"})),
        ]
        for view, response in attempts:
            assert response.status_code == 403, (label, view, response.status_code)
        client.post(
            _url(model, "changelist"),
            {"action": "delete_selected", "_selected_action": [obj.pk], "post": "yes"},
        )
        assert _snapshot() == before, label


def test_a_user_password_cannot_be_set_through_the_admin(populated: Any, root: Any) -> None:
    client = Client()
    client.force_login(root)
    alice = populated["alice"]
    url = reverse("admin:auth_user_password_change", args=[alice.pk])
    hashed = alice.password
    response = client.post(url, {"password1": "n3w-Passw0rd-xyz", "password2": "n3w-Passw0rd-xyz"})
    assert response.status_code == 403
    alice.refresh_from_db()
    assert alice.password == hashed


def test_the_admin_index_says_where_changes_are_made(populated: Any, root: Any) -> None:
    client = Client()
    client.force_login(root)
    page = client.get(reverse("admin:index")).content.decode()
    assert READ_ONLY_NOTE in page
