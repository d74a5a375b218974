"""The platform's capacity reads (clusters.live.fleet): GPUs held per flavor and tenant
(each tenant one colour across bars), the waiting demand of each flavor, and the
numbers the fair-share page shows."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from clusters.live.fleet import capacity_by_flavor, fair_share_by_cohort

pytestmark = pytest.mark.django_db


def test_held_and_waiting_gpus_per_flavor_in_three_queries(
    make_cluster: Any, globex: Any, charlie: Any, django_assert_num_queries: Any
) -> None:
    make_cluster(name="a", gpus=Decimal(4), holds_gpus=True, state="ready").save()
    make_cluster(name="b", gpus=Decimal(2), holds_gpus=True, state="ready").save()
    make_cluster(
        name="c", tenant=globex, owner=charlie, gpus=Decimal(8), holds_gpus=True, state="ready"
    ).save()
    make_cluster(name="d", gpus=Decimal(3)).save()  # waiting for h100
    with django_assert_num_queries(3):
        flavors = {row.flavor.name: row for row in capacity_by_flavor()}
    h100 = flavors["h100"]
    assert h100.total == 32 and h100.allocated == Decimal(14) and h100.free == Decimal(18)
    assert [(r["tenant"], r["gpus"]) for r in h100.held] == [("globex", 8), ("acme", 6)]
    assert [r["percent"] for r in h100.held] == [25, 19]
    assert {r["tenant"]: r["colour"] for r in h100.held} == {"acme": 0, "globex": 1}
    assert (h100.waiting, h100.waiting_requests) == (Decimal(3), 1)
    assert h100.observed_free_gpus is None  # no recent observation: none shown
    assert flavors["l4"].allocated == 0 and flavors["l4"].free_percent == 100


def test_fair_share_shows_each_cohort_s_tenants(acme: Any, globex: Any) -> None:
    cohorts = fair_share_by_cohort()
    tenants = {t.tenant for cohort in cohorts for t in cohort.tenants}
    assert {"acme", "globex"} <= tenants
