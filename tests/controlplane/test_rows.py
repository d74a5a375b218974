"""controlplane.rows: model rows read with plain SQL are the rows the ORM reads, and
the hot reads written with it (the flavor a create names, the tenant with the caller's
role) answer as their ORM expressions do."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from controlplane.rows import ModelRows
from tenants.models import GpuFlavor, Role, Tenant
from tenants.selectors import flavor_named, tenant_role_and_flavor, tenant_with_role

pytestmark = pytest.mark.django_db


def _fields(obj: Any) -> dict[str, tuple[type, Any]]:
    """Every concrete attribute with its type: a naive datetime or an integer boolean
    from SQLite would differ in type while comparing equal."""
    return {
        f.attname: (type(getattr(obj, f.attname)), getattr(obj, f.attname))
        for f in type(obj)._meta.concrete_fields
    }


@pytest.mark.parametrize("model", [GpuFlavor, Tenant])
def test_a_row_is_built_as_the_orm_builds_it(model: Any, acme: Any, h100: Any) -> None:
    GpuFlavor.objects.filter(pk=h100.pk).update(sharing=True, observed_at=timezone.now())
    rows = ModelRows(model, "x")
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {rows.columns} FROM {model._meta.db_table} x ORDER BY x.id")
        built = [rows.build(row) for row in cursor.fetchall()]
    read = list(model.objects.order_by("id"))
    assert [_fields(o) for o in built] == [_fields(o) for o in read]
    assert all(not o._state.adding and o._state.db == "default" for o in built)


def test_the_flavor_a_create_names_is_the_catalogue_row(h100: Any) -> None:
    assert _fields(flavor_named("h100")) == _fields(GpuFlavor.objects.get(name="h100"))
    assert flavor_named("H100") is None
    assert flavor_named("no\x00such") is None  # refused by PostgreSQL, never a 500


def test_the_tenant_comes_with_the_callers_role(
    acme: Any, bob: Any, charlie: Any, root: Any
) -> None:
    found = tenant_with_role(user=bob, slug="acme")
    assert found is not None
    tenant, role = found
    assert _fields(tenant) == _fields(Tenant.objects.get(slug="acme"))
    assert role == Role.ENGINEER
    as_admin = tenant_with_role(user=root, slug="acme")
    assert as_admin is not None and as_admin[1] == Role.ADMIN  # platform admin
    assert tenant_with_role(user=charlie, slug="acme") is None  # not a member
    assert tenant_with_role(user=bob, slug="nope") is None


def test_a_create_reads_its_flavor_with_the_tenant(
    acme: Any, h100: Any, bob: Any, charlie: Any, root: Any
) -> None:
    """The flavor a create's body names comes in the tenant's query, read as
    :func:`flavor_named` reads it; an unknown name or none reads no flavor."""
    for user, role in ((bob, Role.ENGINEER), (root, Role.ADMIN)):
        found = tenant_role_and_flavor(user=user, slug="acme", flavor="h100")
        assert found is not None
        tenant, got_role, flavor = found
        assert _fields(tenant) == _fields(Tenant.objects.get(slug="acme")) and got_role == role
        assert _fields(flavor) == _fields(flavor_named("h100"))
    for name in ("nope", "", "no\x00such"):
        found = tenant_role_and_flavor(user=bob, slug="acme", flavor=name)
        assert found is not None and found[1] == Role.ENGINEER and found[2] is None
    assert tenant_role_and_flavor(user=charlie, slug="acme", flavor="h100") is None
