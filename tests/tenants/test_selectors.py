"""tenants.selectors: who sees which tenant in which role, the user's live tokens, the
catalogue's defaults and the cohort tree, read from the database."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import AnonymousUser
from django.db import transaction
from django.http import Http404
from django.utils import timezone
from knox.models import AuthToken

from tenants import selectors
from tenants.audit import audit_record
from tenants.models import Cohort, Quota, Role


def test_a_tenant_and_the_callers_role_come_together_and_outsiders_find_nothing(
    root: Any, alice: Any, vera: Any, charlie: Any, acme: Any
) -> None:
    found = selectors.tenant_with_role(user=vera, slug="acme")
    assert found is not None and found[0].pk == acme.pk and found[1] == Role.VIEWER
    assert selectors.tenant_with_role(user=root, slug="acme") == (acme, Role.ADMIN)
    assert selectors.tenant_with_role(user=charlie, slug="acme") is None
    assert selectors.tenant_with_role(user=AnonymousUser(), slug="acme") is None
    assert selectors.tenant_with_role(user=alice, slug="ac\x00me") is None
    assert selectors.role_in_tenant(user=charlie, tenant=acme) is None
    assert selectors.has_role(user=vera, tenant=acme, at_least=Role.VIEWER)
    assert not selectors.has_role(user=vera, tenant=acme, at_least=Role.ENGINEER)


def test_a_role_grants_only_roles_up_to_its_own() -> None:
    assert selectors.role_may_grant(granter_role=Role.ADMIN, role=Role.ADMIN)
    assert not selectors.role_may_grant(granter_role=Role.ENGINEER, role=Role.ADMIN)


def test_only_live_tokens_are_listed_and_another_users_is_a_404(bob: Any, alice: Any) -> None:
    live, _ = AuthToken.objects.create(user=bob)
    AuthToken.objects.create(user=bob, expiry=timedelta(seconds=-1))
    assert list(selectors.token_list(user=bob)) == [live]
    assert selectors.token_get(user=bob, token_id=live.digest[:16]) == live
    with pytest.raises(Http404):
        selectors.token_get(user=alice, token_id=live.digest[:16])
    with pytest.raises(Http404):
        selectors.token_get(user=bob, token_id="not-hex")
    assert live.expiry is None or live.expiry > timezone.now()


def test_the_default_flavor_is_the_first_with_nominal_quota(acme: Any, h100: Any) -> None:
    assert selectors.default_flavor_name(acme) == "h100"
    Quota.objects.filter(tenant=acme, flavor=h100).update(gpus=0)
    assert selectors.default_flavor_name(acme) == "l4"
    assert selectors.flavor_named("h100") == h100
    assert selectors.flavor_named("h1\x0000") is None
    assert "nope" in selectors.unknown_flavor_message("nope")


def test_the_cohort_tree_names_row_tenant_and_parent_cohorts_with_their_roots(
    acme: Any, globex: Any
) -> None:
    Cohort.objects.create(name="research", parent="org", description="labs")
    acme.cohort = "research"
    acme.save(update_fields=["cohort"])
    tree = {node.name: node for node in selectors.cohort_tree()}
    assert set(tree) == {"default", "org", "research"}
    assert tree["research"].root == "org" and tree["research"].tenants == ("acme",)
    assert tree["org"].defined is False and tree["default"].tenants == ("globex",)
    assert selectors.cohort_node("nowhere") is None
    assert selectors.cohort_path("a", {"a": "b", "b": "a"}) == ["a", "b"]


def test_audit_events_are_read_by_admins_only(alice: Any, bob: Any, root: Any) -> None:
    with transaction.atomic():
        audit_record(actor=root, action="probe", object_type="x", object_id="1")
    assert selectors.audit_list(user=root).count() == 1
    assert selectors.audit_list(user=bob).count() == 0
