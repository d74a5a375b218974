"""A tenant's slug has one rule (tenants/slugs.py): the API, the service, the dashboard's
form and the demo loader refuse what it refuses, each with the message the field's help
states; a tenant created under an older rule keeps working."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ValidationError

from frontend.admin_forms import TenantCreateForm
from tenants import services
from tenants.models import Tenant
from tenants.slugs import SLUG_HELP
from tests.tenants.conftest import row_counts

T = "/api/v1/tenants/"

GOOD = ["a", "vision", "team-2", "a1", "kubeflow", "defaults", "my-default", "a" * 40]
BAD = [
    "",
    "Vision",
    "team_x",
    "team.x",
    "team x",
    "tëam",
    "1team",
    "-lead",
    "team-",
    "a" * 41,
    "default",
    "kube-system",
    "kube-public",
    "kube-ops",
]


@pytest.mark.parametrize("slug", GOOD)
def test_a_good_slug_makes_a_tenant(root: Any, as_user: Any, slug: str) -> None:
    response = as_user(root).post(T, {"slug": slug, "name": "Team"}, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["namespace"] == f"gw-{slug}"


@pytest.mark.parametrize("slug", BAD)
def test_a_bad_slug_is_a_400_saying_what_the_help_says(
    everyone: Any, as_user: Any, slug: str
) -> None:
    before = row_counts()
    response = as_user(everyone["root"]).post(T, {"slug": slug, "name": "Team"}, format="json")
    assert response.status_code == 400, response.content
    assert response.json()["error"]["fields"] == {"slug": [SLUG_HELP]}
    assert row_counts() == before


def test_the_schema_states_the_rule(root: Any, as_user: Any) -> None:
    schema = as_user(root).get("/api/schema/", {"format": "json"}).json()
    slug = schema["components"]["schemas"]["TenantWriteRequest"]["properties"]["slug"]
    assert slug["description"] == SLUG_HELP
    assert slug["pattern"].startswith("^(?!default$)(?!kube-)")


@pytest.mark.parametrize("slug", ["kube-ops", "default", "Ops", "a" * 41])
def test_the_service_refuses_a_bad_slug_for_every_caller(root: Any, slug: str) -> None:
    with pytest.raises(ValidationError) as caught:
        services.tenant_create(actor=root, slug=slug, name="Ops")
    assert SLUG_HELP in caught.value.message_dict["slug"]
    assert not Tenant.objects.unscoped().exists()


@pytest.mark.parametrize("slug", BAD)
def test_the_dashboard_form_says_what_its_help_says(slug: str) -> None:
    form = TenantCreateForm(data={"slug": slug, "name": "Team", "cohort": "default", "weight": 1})
    assert not form.is_valid()
    expected = ["This field is required."] if slug == "" else [SLUG_HELP]
    assert form.errors == {"slug": expected}
    assert str(form["slug"].help_text).startswith(SLUG_HELP)


@pytest.mark.parametrize("slug", GOOD)
def test_the_dashboard_form_takes_a_good_slug(slug: str) -> None:
    form = TenantCreateForm(data={"slug": slug, "name": "Team", "cohort": "default", "weight": 1})
    assert form.is_valid(), form.errors


def test_a_tenant_made_under_an_older_rule_keeps_working(
    root: Any, as_user: Any, h100: Any
) -> None:
    # Written as an older release could: the slug rule then allowed kube-*.
    legacy = Tenant.objects.create(slug="kube-ml", name="ML", namespace="gw-kube-ml")
    api = as_user(root)

    renamed = api.patch(f"{T}kube-ml/", {"slug": "kube-ml", "name": "ML Platform"}, format="json")
    assert renamed.status_code == 200, renamed.content
    quota = api.put(
        f"{T}kube-ml/quotas/",
        {"flavors": [{"flavor": "h100", "gpus": 2}], "cpu": 0, "memory_gib": 0},
        format="json",
    )
    assert quota.status_code == 200, quota.content
    services.tenant_policy_update(actor=root, tenant=legacy, changes={"dev_ttl_hours": 4})
    legacy.refresh_from_db()
    assert (legacy.name, legacy.dev_ttl_hours) == ("ML Platform", 4)

    # ... but no tenant is created under it anew.
    again = api.post(T, {"slug": "kube-ml2", "name": "ML 2"}, format="json")
    assert again.json()["error"]["fields"] == {"slug": [SLUG_HELP]}
