"""A tenant's namespace is always the prefix plus its slug, and never a namespace that
belongs to Kubernetes or to the control plane: at the API, in the service (the dashboard,
seed_demo and a shell call it too) and, for writes that skip validation, in the database.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from tenants import services
from tenants.demo import demo_seed
from tenants.models import Tenant
from tests.tenants.conftest import row_counts

T = "/api/v1/tenants/"


@pytest.mark.parametrize(
    ("namespace", "says"),
    [
        ("kube-system", "'kube-system' belongs to Kubernetes itself."),
        ("kube-public", "'kube-public' belongs to Kubernetes itself."),
        ("default", "'default' belongs to Kubernetes itself."),
        ("gangway-system", "'gangway-system' is the control plane's own namespace."),
        ("gw-globex", "'gw-globex' cannot be chosen."),
        ("team-ok", "'team-ok' cannot be chosen."),
    ],
)
def test_a_chosen_namespace_is_a_400_on_namespace_and_writes_nothing(
    everyone: Any, as_user: Any, namespace: str, says: str
) -> None:
    before = row_counts()
    response = as_user(everyone["root"]).post(
        T, {"slug": "ok", "name": "OK", "namespace": namespace}, format="json"
    )
    assert response.status_code == 400, response.content
    messages = response.json()["error"]["fields"]["namespace"]
    assert messages == [f"{says} A tenant's namespace is always 'gw-' plus its slug ('gw-ok')."]
    assert row_counts() == before


def test_the_derived_namespace_may_be_given_or_left_out(root: Any, as_user: Any) -> None:
    api = as_user(root)
    given = api.post(T, {"slug": "given", "name": "G", "namespace": "gw-given"}, format="json")
    assert given.status_code == 201, given.content
    assert given.json()["namespace"] == "gw-given"
    assert api.post(T, {"slug": "left", "name": "L"}, format="json").json()["namespace"] == (
        "gw-left"
    )


def test_a_slug_whose_namespace_is_the_control_planes_is_refused_on_the_slug(
    everyone: Any, as_user: Any, settings: Any
) -> None:
    settings.CONTROL_PLANE_NAMESPACE = "gw-system"
    before = row_counts()
    response = as_user(everyone["root"]).post(T, {"slug": "system", "name": "S"}, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["fields"]["slug"] == [
        "'gw-system' is the control plane's own namespace. A tenant's namespace is always "
        "'gw-' plus its slug ('gw-system')."
    ]
    assert row_counts() == before


def test_the_service_refuses_kubernetes_namespaces_for_every_caller(root: Any) -> None:
    for namespace in ("kube-system", "default"):
        with pytest.raises(ValidationError) as caught:
            services.tenant_create(actor=root, slug="ops", name="Ops", namespace=namespace)
        assert "belongs to Kubernetes itself" in caught.value.message_dict["namespace"][0]
    assert not Tenant.objects.filter(slug="ops").exists()


def test_seed_demo_follows_the_same_rule(db: Any, settings: Any) -> None:
    settings.CONTROL_PLANE_NAMESPACE = "gw-vision"
    with pytest.raises(ValidationError) as caught:
        demo_seed()
    assert "'gw-vision' is the control plane's own namespace" in str(caught.value)
    assert not Tenant.objects.exists()


def test_existing_tenants_keep_their_namespace_when_the_prefix_changes(
    root: Any, acme: Any, as_user: Any, settings: Any
) -> None:
    settings.TENANT_NAMESPACE_PREFIX = "team-"
    response = as_user(root).patch(f"{T}acme/", {"name": "Acme Labs"}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["namespace"] == "gw-acme"


@pytest.mark.parametrize(
    ("slug", "namespace"), [("ops", "kube-system"), ("ops", "default"), ("ops", "gw-acme")]
)
def test_the_database_refuses_what_skips_validation(db: Any, slug: str, namespace: str) -> None:
    with pytest.raises(IntegrityError), transaction.atomic():
        Tenant.objects.create(slug=slug, name="Ops", namespace=namespace)
