"""What a quota change would do before it is saved (clusters.queue.quota_preview), from
today's queue and the admission core: the sums against the fleet, the requests it would
admit, and where the tenant would become a borrower. Nothing is written."""

from __future__ import annotations

from typing import Any

import pytest

from clusters.domain.states import State
from clusters.models import ClusterRequest
from clusters.queue.admission_pass import run_admission_pass
from clusters.queue.quota_preview import ProposedLine, quota_preview
from clusters.requests import services
from clusters.rows.spec import ClusterSpec
from tenants.models import Quota

pytestmark = pytest.mark.django_db


def test_a_quota_beyond_the_fleet_is_a_warning_and_nothing_is_saved(acme: Any) -> None:
    preview = quota_preview(tenant=acme, lines=[ProposedLine("h100", 400), ProposedLine("l4", 2)])
    h100 = next(t for t in preview.totals if t.flavor == "h100")
    assert (h100.fleet_gpus, h100.nominal_before, h100.nominal_after) == (32, 16, 400)
    assert h100.oversubscribed
    assert preview.warnings == [
        "Nominal h100 quotas would add up to 400 GPUs; the fleet has 32. Tenants could be "
        "promised GPUs that do not exist."
    ]
    assert Quota.objects.get(tenant=acme, flavor__name="h100").gpus == 16


def test_it_names_what_a_raise_would_admit_and_who_a_cut_makes_a_borrower(
    acme: Any, alice: Any, bob: Any, l4: Any
) -> None:
    holder = services.cluster_request_create(
        actor=alice, tenant=acme, spec=ClusterSpec(kind="dev", flavor=l4, workers=2, name="holder")
    )
    third = services.cluster_request_create(
        actor=bob, tenant=acme, spec=ClusterSpec(kind="dev", flavor=l4, workers=1, name="third")
    )
    run_admission_pass()
    assert ClusterRequest.objects.get(pk=third.pk).state == State.QUEUED

    raised = quota_preview(tenant=acme, lines=[ProposedLine("h100", 16), ProposedLine("l4", 3)])
    assert [row.pk for row in raised.would_admit] == [third.pk]
    assert not raised.borrowing

    cut = quota_preview(tenant=acme, lines=[ProposedLine("h100", 16), ProposedLine("l4", 1)])
    assert not cut.would_admit
    (line,) = cut.borrowing
    assert (line["flavor"], line["nominal"], line["clusters"]) == ("l4", 1, [holder.name])
    assert Quota.objects.get(tenant=acme, flavor__name="l4").gpus == 2
