"""The admission pass on the database with requests that accept several flavors.

With ``flavors: [h100, l4]`` a request gets l4 when acme's h100s are all taken and h100
when they are free, never both; the row, its usage span and the ledger record the flavor
it got, with its demand there; while it waits it shows its standing on each flavor.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from clusters.models import ClusterRequest, UsageSpan
from clusters.queue.admission_pass import run_admission_pass
from clusters.queue.snapshot_reads import build_snapshot
from tenants.models import Quota

pytestmark = pytest.mark.django_db

CLUSTERS = "/api/v1/tenants/acme/clusters/"


def _create(api: Any, name: str, **body: Any) -> ClusterRequest:
    response = api.post(CLUSTERS, {"name": name, **body}, format="json")
    assert response.status_code == 201, response.content
    return ClusterRequest.objects.get(name=name)


def _held_by(row: ClusterRequest) -> dict[str, Decimal]:
    """GPUs ``row`` holds per flavor, from the snapshot the next pass would read."""
    snapshot, _ = build_snapshot()
    out: dict[str, Decimal] = {}
    for r in snapshot.running:
        if r.id == row.pk:
            out[r.flavor] = out.get(r.flavor, Decimal(0)) + r.gpus
    return out


@pytest.fixture
def roomy(acme: Any, h100: Any) -> Any:
    acme.max_dev_clusters_per_user = 10
    acme.max_dev_gpus_per_user = 10
    acme.save()
    # acme's h100 quota: one GPU, nothing to borrow.
    Quota.objects.filter(tenant=acme, flavor=h100).update(gpus=1, borrow_limit=0)
    return acme


def test_gets_h100_when_free_and_l4_when_h100_is_full(
    as_user: Any, bob: Any, roomy: Any, l4: Any
) -> None:
    api = as_user(bob)
    first = _create(api, "first", flavors=["h100", "l4"])
    assert run_admission_pass().admitted == [first.pk]
    first.refresh_from_db()
    assert first.state == "admitted" and first.flavor.name == "h100"
    assert _held_by(first) == {"h100": Decimal(1)}

    second = _create(api, "second", flavors=["h100", "l4"])
    assert second.flavor.name == "h100" and second.cpu > 0  # the first preference
    assert run_admission_pass().admitted == [second.pk]
    second.refresh_from_db()
    assert second.flavor.name == "l4"  # h100 is full: admitted on l4
    assert second.accepted_flavors == ["h100", "l4"]
    # Charged l4's slice of a node, not h100's (a dev worker is one GPU on either).
    assert second.gpus == Decimal(1)
    assert second.cpu < first.cpu  # the head plus an l4 slice, less than an h100 slice
    assert _held_by(second) == {"l4": Decimal(1)}
    span = UsageSpan.objects.get(cluster_id=second.pk)
    assert span.flavor_name == "l4" and span.gpus == Decimal(1)
    # The manifests put its worker on an l4 node.
    manifests = api.get(CLUSTERS + "second/manifests/").json()["manifests"]
    worker = manifests[0]["spec"]["workerGroupSpecs"][0]["template"]["spec"]
    assert worker["nodeSelector"]["nvidia.com/gpu.product"] == "NVIDIA-L4"
    out = api.get(CLUSTERS + "second/").json()
    assert out["flavor"] == "l4" and out["flavors"] == ["h100", "l4"]
    assert out["queue"] is None


def test_waits_on_both_and_shows_its_standing_on_each(
    as_user: Any, bob: Any, roomy: Any, l4: Any
) -> None:
    Quota.objects.filter(tenant=roomy, flavor=l4).update(gpus=1, borrow_limit=0)
    api = as_user(bob)
    _create(api, "on-h100", flavor="h100")
    _create(api, "on-l4", flavor="l4")
    run_admission_pass()
    waiting = _create(api, "either", flavors=["h100", "l4"])
    result = run_admission_pass()
    assert result.admitted == []
    waiting.refresh_from_db()
    assert waiting.state == "queued" and waiting.flavor.name == "h100"
    assert [f["flavor"] for f in waiting.queue_flavors] == ["h100", "l4"]
    assert all(f["position"] == 1 and f["reason"] == "tenant_quota" for f in waiting.queue_flavors)
    assert "any of h100, l4" in waiting.queue_message
    out = api.get(CLUSTERS + "either/").json()
    assert [f["flavor"] for f in out["queue"]["flavors"]] == ["h100", "l4"]
    queue = api.get("/api/v1/tenants/acme/queue/").json()["results"]
    (entry,) = [e for e in queue if e["name"] == "either"]
    assert entry["flavors"] == ["h100", "l4"]
    assert [f["flavor"] for f in entry["flavor_standing"]] == ["h100", "l4"]

    # The l4 cluster goes: the next pass admits it there, and only there.
    ClusterRequest.objects.filter(name="on-l4").update(holds_gpus=False, state="deleted")
    assert run_admission_pass().admitted == [waiting.pk]
    waiting.refresh_from_db()
    assert waiting.flavor.name == "l4" and waiting.queue_flavors == []
    assert _held_by(waiting) == {"l4": Decimal(1)}
    assert UsageSpan.objects.filter(cluster_id=waiting.pk).count() == 1


def test_kueue_mode_records_the_flavor_kueue_admitted_on() -> None:
    from clusters.queue.kueue import admitted_flavor

    workload = {
        "status": {
            "admission": {
                "podSetAssignments": [
                    {"name": "head", "flavors": {"cpu": "ray-heads", "memory": "ray-heads"}},
                    {"name": "workers", "flavors": {"cpu": "l4", "nvidia.com/gpu": "l4"}},
                ]
            }
        }
    }
    assert admitted_flavor(workload) == "l4"
    assert admitted_flavor({"status": {}}) is None


def test_resumed_it_waits_on_its_first_preference_again(
    as_user: Any, bob: Any, roomy: Any, l4: Any
) -> None:
    from clusters.domain.states import State
    from clusters.requests import services
    from clusters.rows.transitions import transition

    api = as_user(bob)
    _create(api, "hog", flavor="h100")
    row = _create(api, "either", flavors=["h100", "l4"])
    run_admission_pass()
    row.refresh_from_db()
    assert row.flavor.name == "l4"
    transition(row, State.PROVISIONING, reason="applied")
    transition(row, State.READY, reason="ready")
    services.cluster_suspend(actor=None, cluster=row)
    services.cluster_resume(actor=bob, cluster=row)
    row.refresh_from_db()
    assert row.state == "queued" and row.flavor.name == "h100"
    ClusterRequest.objects.filter(name="hog").update(holds_gpus=False, state="deleted")
    assert run_admission_pass().admitted == [row.pk]
    row.refresh_from_db()
    assert row.flavor.name == "h100"
    assert list(
        UsageSpan.objects.filter(cluster_id=row.pk).values_list("flavor_name", flat=True)
    ) == [
        "l4",
        "h100",
    ]


def test_the_dashboard_queue_shows_the_standing_on_each_flavor(
    client: Any, as_user: Any, bob: Any, roomy: Any, l4: Any
) -> None:
    from django.urls import reverse

    Quota.objects.filter(tenant=roomy, flavor=l4).update(gpus=1, borrow_limit=0)
    api = as_user(bob)
    _create(api, "on-h100", flavor="h100")
    _create(api, "on-l4", flavor="l4")
    run_admission_pass()
    _create(api, "either", flavors=["h100", "l4"])
    run_admission_pass()
    client.force_login(bob)
    page = client.get(reverse("tenant-queue-page", args=["acme"])).content.decode()
    assert "h100 or l4" in page
    assert "h100: #1 (team quota used up)" in page and "l4: #1 (team quota used up)" in page
