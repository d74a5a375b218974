"""Who may do what with clusters, and the per-engineer caps (clusters.requests.rules),
on real memberships and rows."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from clusters.domain.states import State
from clusters.requests.rules import (
    can_manage,
    check_user_caps,
    may_request,
    owner_dev_usage,
    requester_refusal,
)
from controlplane.exceptions import ServiceConflict
from tenants.models import Role

pytestmark = pytest.mark.django_db


def test_engineers_request_dev_and_only_admins_prod() -> None:
    assert may_request(role=Role.ENGINEER, kind="dev")
    assert not may_request(role=Role.ENGINEER, kind="prod")
    assert may_request(role=Role.ADMIN, kind="prod")
    assert not may_request(role=Role.VIEWER, kind="dev")
    assert not may_request(role=None, kind="dev")


def test_a_refusal_says_the_role_needed_and_held(acme: Any) -> None:
    assert requester_refusal(tenant=acme, role=Role.VIEWER) == (
        "Requesting a cluster needs the engineer role in Acme Research; you are a viewer."
    )
    assert requester_refusal(tenant=acme, role=None, kind="prod").endswith(
        "needs the admin role in Acme Research; you are not a member."
    )


def test_owners_and_admins_manage_a_cluster_others_do_not(
    make_cluster: Any, alice: Any, bob: Any, vera: Any, charlie: Any
) -> None:
    cluster = make_cluster()
    cluster.save()
    assert can_manage(actor=bob, cluster=cluster)
    assert can_manage(actor=alice, cluster=cluster)
    assert not can_manage(actor=vera, cluster=cluster)
    assert not can_manage(actor=charlie, cluster=cluster)  # another tenant's engineer


def test_dev_usage_counts_live_dev_requests_and_caps_refuse_beyond(
    make_cluster: Any, acme: Any, bob: Any
) -> None:
    first = make_cluster(name="bob-one", workers=2, gpus=Decimal(2))
    first.save()
    make_cluster(name="bob-prod", kind="prod", workers=1).save()
    make_cluster(name="bob-gone", state=State.DELETED).save()
    assert owner_dev_usage(tenant=acme, owner=bob) == (1, first.gpus)
    assert owner_dev_usage(tenant=acme, owner=bob, excluding=first.pk) == (0, Decimal("0.000"))

    acme.max_dev_clusters_per_user = 1
    acme.save()
    with pytest.raises(ServiceConflict) as refused:
        check_user_caps(tenant=acme, owner=bob, kind="dev", gpus=Decimal(1))
    assert refused.value.code == "user_cap"
    assert "the limit is 1" in str(refused.value)
    check_user_caps(tenant=acme, owner=bob, kind="prod", gpus=Decimal(8))  # prod: no cap
