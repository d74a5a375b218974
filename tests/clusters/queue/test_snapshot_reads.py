"""The snapshot submission asks "could it ever fit?" of: the tenant's own quota alone
(read in plain SQL, on every create) says what the tenant's rows say."""

from __future__ import annotations

from typing import Any

import pytest

from clusters.admission.snapshot import QuotaQ
from clusters.queue.snapshot_reads import policy_snapshot
from tenants.models import Quota

pytestmark = pytest.mark.django_db


def test_alone_the_snapshot_holds_the_tenant_s_own_quota_row(
    acme: Any, globex: Any, h100: Any, l4: Any
) -> None:
    Quota.objects.filter(tenant=acme, flavor=h100).update(gpus=12, borrow_limit=3, lend_limit=4)
    alone = policy_snapshot(tenant=acme, flavor=h100, alone=True)
    assert alone.quotas == [
        QuotaQ(tenant="acme", flavor="h100", gpus=12, borrow_limit=3, lend_limit=4)
    ]
    assert [t.slug for t in alone.tenants] == ["acme"] and alone.cohort_parents == {}
    full = policy_snapshot(tenant=acme, flavor=h100)
    assert [q for q in full.quotas if q.tenant == "acme"] == alone.quotas

    Quota.objects.filter(tenant=acme, flavor=l4).delete()
    assert policy_snapshot(tenant=acme, flavor=l4, alone=True).quotas == []
