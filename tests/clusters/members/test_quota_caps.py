"""Caps on a tenant's quota per member: set and removed through the API by platform
admins, refused (and nothing changed) for bad input, read by the admission pass, which
then places a gang on another member or lets it wait and says why."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from clusters.models import ClusterRequest, FlavorStock, KubeCluster, MemberQuotaCap
from clusters.queue.admission_pass import run_admission_pass
from tenants.models import AuditEvent, Quota

pytestmark = pytest.mark.django_db

CAPS = "/api/v1/platform/quota-caps/"
CLUSTERS = "/api/v1/tenants/acme/clusters/"


def _member(name: str, order: int, flavor: Any) -> KubeCluster:
    """A member with four nodes of ``flavor``, all seen free just now."""
    member = KubeCluster.objects.create(name=name, placement_order=order)
    FlavorStock.objects.create(
        kube_cluster=member,
        flavor=flavor,
        node_count=4,
        observed_free_gpus=4 * flavor.gpus_per_node,
        observed_free_nodes=4,
        observed_nodes=4,
        observed_at=timezone.now(),
    )
    return member


@pytest.fixture
def fleet(acme: Any, h100: Any) -> dict[str, KubeCluster]:
    """onprem then cloud, 32 H100 GPUs free on each; the migration's default member is
    cordoned, out of the way."""
    KubeCluster.objects.filter(name="default").update(schedulable="cordoned")
    acme.max_dev_clusters_per_user = acme.max_dev_gpus_per_user = 50
    acme.save()
    Quota.objects.filter(tenant=acme, flavor=h100).update(gpus=64)
    return {"onprem": _member("onprem", 1, h100), "cloud": _member("cloud", 2, h100)}


def _cap(api: Any, gpus: Any, **names: str) -> Any:
    body = {"tenant": "acme", "kube_cluster": "onprem", "flavor": "h100", "gpus": gpus} | names
    return api.put(CAPS, body, format="json")


def test_a_cap_sends_gangs_past_it_to_the_next_member_and_says_why(
    as_user: Any, root: Any, bob: Any, fleet: dict[str, KubeCluster]
) -> None:
    admin = as_user(root)
    answer = _cap(admin, 8)
    assert answer.status_code == 200, answer.content
    assert answer.json() == {
        "tenant": "acme",
        "kube_cluster": "onprem",
        "flavor": "h100",
        "gpus": 8,
    }
    assert admin.get(CAPS, {"tenant": "acme"}).json() == [answer.json()]
    assert AuditEvent.objects.filter(action="quota.cap_set", tenant_slug="acme").exists()

    api = as_user(bob)
    verdict = api.post(CLUSTERS + "dry-run/", {"flavor": "h100", "workers": 16}, format="json")
    assert verdict.json()["kube_cluster"] == "cloud"
    assert verdict.json()["headline"] == (
        "Fits now on h100 in cloud (default is cordoned; acme may hold at most 8 h100 GPUs "
        "on onprem): 16 GPUs charged."
    )
    for name, workers in (("six", 6), ("four", 4), ("two", 2)):
        body = {"name": name, "flavor": "h100", "workers": workers}
        assert api.post(CLUSTERS, body, format="json").status_code == 201
    run_admission_pass()
    where = dict(ClusterRequest.objects.values_list("name", "kube_cluster__name"))
    # six fits under the cap on onprem; four would take acme to 10 there; two fits again.
    assert where == {"six": "onprem", "four": "cloud", "two": "onprem"}
    four = ClusterRequest.objects.get(name="four")
    said = "to run in cloud (default is cordoned; acme may hold at most 8 h100 GPUs on onprem"
    assert four.events.filter(message__contains=f"{said} and holds 6 there)").exists()
    onprem = ClusterRequest.objects.filter(kube_cluster=fleet["onprem"])
    assert sum(r.gpus for r in onprem) <= 8


def test_a_gang_over_every_cap_waits_and_the_queue_says_why(
    as_user: Any, root: Any, bob: Any, fleet: dict[str, KubeCluster]
) -> None:
    admin = as_user(root)
    assert _cap(admin, 4).status_code == 200
    assert _cap(admin, 2, kube_cluster="cloud").status_code == 200
    api = as_user(bob)
    assert api.post(CLUSTERS, {"name": "big", "flavor": "h100", "workers": 6}, format="json")
    run_admission_pass()
    row = ClusterRequest.objects.get(name="big")
    assert row.kube_cluster is None and row.queue_reason == "capacity"
    assert row.queue_message == (
        "No cluster it may use has room for the whole gang now (default is cordoned; acme may "
        "hold at most 4 h100 GPUs on onprem; acme may hold at most 2 h100 GPUs on cloud)."
    )
    # Removing a cap (gpus null) lets it through on the first member.
    assert _cap(admin, None).status_code == 204
    assert not MemberQuotaCap.objects.filter(kube_cluster=fleet["onprem"]).exists()
    run_admission_pass()
    row.refresh_from_db()
    assert row.kube_cluster == fleet["onprem"]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"gpus": -1}, "gpus"),
        ({"gpus": 2.5}, "gpus"),
        ({"gpus": "8"}, "gpus"),
        ({"kube_cluster": "nowhere"}, "kube_cluster"),
        ({"flavor": "a100"}, "flavor"),
        ({"tenant": "nobody"}, "tenant"),
    ],
)
def test_bad_input_is_a_400_that_changes_nothing(
    as_user: Any, root: Any, fleet: dict[str, KubeCluster], change: dict[str, Any], field: str
) -> None:
    admin = as_user(root)
    assert _cap(admin, 8).status_code == 200
    body = {"tenant": "acme", "kube_cluster": "onprem", "flavor": "h100", "gpus": 4} | change
    answer = admin.put(CAPS, body, format="json")
    assert answer.status_code == 400, answer.content
    assert field in str(answer.json())
    assert list(MemberQuotaCap.objects.values_list("kube_cluster__name", "gpus")) == [("onprem", 8)]


def test_only_platform_admins_see_or_set_caps(
    as_user: Any, alice: Any, fleet: dict[str, KubeCluster]
) -> None:
    api = as_user(alice)  # acme's tenant admin
    assert api.get(CAPS).status_code == 403
    assert _cap(api, 8).status_code == 403
    assert not MemberQuotaCap.objects.exists()
