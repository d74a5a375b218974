"""Placement on the database: the pass reads the fleet (members, stock, allow-lists),
records where each gang runs, and the API takes and shows a request's cluster or region.

No worker: the pass is called directly, as the Celery task would.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from clusters.domain.states import State
from clusters.models import ClusterRequest, FlavorStock, KubeCluster
from clusters.queue.admission_pass import run_admission_pass
from clusters.rows.transitions import transition
from tenants.models import Quota
from tests.clusters.kinds.rayservice.samples import STABLE_DIFFUSION

pytestmark = pytest.mark.django_db

CLUSTERS = "/api/v1/tenants/acme/clusters/"
JOBS = "/api/v1/tenants/acme/jobs/"
SERVICES = "/api/v1/tenants/acme/services/"


def _member(name: str, order: int, flavor: Any, free_gpus: int, **kw: Any) -> KubeCluster:
    """A member with two nodes of ``flavor``, ``free_gpus`` of them seen free just now."""
    member = KubeCluster.objects.create(name=name, placement_order=order, **kw)
    FlavorStock.objects.create(
        kube_cluster=member,
        flavor=flavor,
        node_count=2,
        observed_free_gpus=free_gpus,
        observed_free_nodes=free_gpus // flavor.gpus_per_node,
        observed_nodes=2,
        observed_at=timezone.now(),
    )
    return member


@pytest.fixture
def fleet(acme: Any, h100: Any) -> dict[str, KubeCluster]:
    """onprem (order 1, full) and cloud (order 2, 16 H100 GPUs free); the migration's
    default member is left out of placement (it lists no stock and is cordoned)."""
    KubeCluster.objects.filter(name="default").update(schedulable="cordoned")
    acme.max_dev_clusters_per_user = acme.max_dev_gpus_per_user = 50
    acme.save()
    Quota.objects.filter(tenant=acme, flavor=h100).update(gpus=64)
    return {"onprem": _member("onprem", 1, h100, 0), "cloud": _member("cloud", 2, h100, 16)}


def test_the_pass_spills_over_and_records_where_each_gang_runs(
    as_user: Any, bob: Any, fleet: dict[str, KubeCluster]
) -> None:
    api = as_user(bob)
    verdict = api.post(CLUSTERS + "dry-run/", {"flavor": "h100", "workers": 8}, format="json")
    assert verdict.json()["kube_cluster"] == "cloud"
    assert verdict.json()["headline"] == (
        "Fits now on h100 in cloud (default is cordoned; onprem is full): 8 GPUs charged."
    )
    for name in ("one", "two", "three"):
        body = {"name": name, "flavor": "h100", "workers": 8}
        assert api.post(CLUSTERS, body, format="json").status_code == 201
    result = run_admission_pass()
    # cloud has 16 free: two gangs of 8; the third is not offered what they took.
    assert len(result.admitted) == 2
    placed = ClusterRequest.objects.filter(pk__in=result.admitted)
    assert {r.kube_cluster.name for r in placed} == {"cloud"}
    first = placed.first()
    assert first is not None
    timeline = "to run in cloud (default is cordoned; onprem is full)"
    assert first.events.filter(message__contains=timeline).exists()
    waiting = ClusterRequest.objects.get(state=State.QUEUED)
    assert waiting.kube_cluster is None
    assert waiting.queue_reason == "capacity"
    assert "onprem is full" in waiting.queue_message
    assert "cloud has" in waiting.queue_message or "cloud is full" in waiting.queue_message
    detail = api.get(CLUSTERS + f"{first.name}/").json()
    assert detail["kube_cluster"] == "cloud"
    assert api.get(CLUSTERS + "three/").json()["kube_cluster"] is None


def test_allow_lists_keep_a_tenant_off_a_member(
    as_user: Any, bob: Any, globex: Any, fleet: dict[str, KubeCluster]
) -> None:
    fleet["cloud"].allowed_tenants.set([globex])
    api = as_user(bob)
    assert api.post(CLUSTERS, {"name": "a", "flavor": "h100"}, format="json").status_code == 201
    assert run_admission_pass().admitted == []
    row = ClusterRequest.objects.get(name="a")
    assert row.queue_message == (
        "No cluster it may use has room for the whole gang now (default is cordoned; "
        "onprem is full; cloud is not open to acme)."
    )
    # Naming it is refused outright: nothing is created.
    refused = api.post(
        CLUSTERS, {"name": "b", "flavor": "h100", "kube_cluster": "cloud"}, format="json"
    )
    assert refused.status_code == 400
    assert "acme may not use the Kubernetes cluster 'cloud'" in str(refused.json())
    assert not ClusterRequest.objects.filter(name="b").exists()


def test_a_wanted_cluster_is_stored_and_honoured(
    as_user: Any, bob: Any, fleet: dict[str, KubeCluster]
) -> None:
    KubeCluster.objects.filter(pk=fleet["onprem"].pk).update(region="eu")
    FlavorStock.objects.filter(kube_cluster=fleet["onprem"]).update(observed_free_gpus=16)
    api = as_user(bob)
    body = {"name": "c", "flavor": "h100", "kube_cluster": "cloud"}
    assert api.post(CLUSTERS, body, format="json").status_code == 201
    body = {"name": "r", "flavor": "h100", "region": "eu"}
    assert api.post(CLUSTERS, body, format="json").status_code == 201
    run_admission_pass()
    assert ClusterRequest.objects.get(name="c").kube_cluster == fleet["cloud"]
    assert ClusterRequest.objects.get(name="c").wanted_kube_cluster == fleet["cloud"]
    assert ClusterRequest.objects.get(name="r").kube_cluster == fleet["onprem"]


@pytest.mark.parametrize(
    ("url", "extra"),
    [
        (CLUSTERS, {}),
        (JOBS, {"entrypoint": "python x.py"}),
        (SERVICES, {"serve_config": STABLE_DIFFUSION}),
    ],
)
@pytest.mark.parametrize(
    ("placement", "field", "words"),
    [
        ({"kube_cluster": "nowhere"}, "kube_cluster", "no Kubernetes cluster called 'nowhere'"),
        ({"region": "mars"}, "region", "no Kubernetes cluster in region 'mars'"),
        ({"kube_cluster": "cloud", "region": "eu"}, "region", "is in region '(none)'"),
    ],
)
def test_every_kind_refuses_a_bad_cluster_or_region(
    as_user: Any,
    alice: Any,
    fleet: dict[str, KubeCluster],
    url: str,
    extra: dict[str, Any],
    placement: dict[str, str],
    field: str,
    words: str,
) -> None:
    body = {"name": "x", "flavor": "h100", **extra, **placement}
    response = as_user(alice).post(url, body, format="json")
    assert response.status_code == 400, response.content
    assert words in " ".join(response.json()["error"]["fields"][field])
    assert not ClusterRequest.objects.filter(name="x").exists()


@pytest.mark.parametrize(
    ("url", "extra"),
    [(JOBS, {"entrypoint": "python x.py"}), (SERVICES, {"serve_config": STABLE_DIFFUSION})],
)
def test_every_kind_takes_a_cluster_and_shows_where_it_runs(
    as_user: Any, alice: Any, fleet: dict[str, KubeCluster], url: str, extra: dict[str, Any]
) -> None:
    body = {"name": "x", "flavor": "h100", "kube_cluster": "cloud", **extra}
    response = as_user(alice).post(url, body, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["kube_cluster"] is None  # waiting: not placed yet
    run_admission_pass()
    assert as_user(alice).get(url + "x/").json()["kube_cluster"] == "cloud"


def test_back_in_the_queue_a_request_is_placed_afresh_unless_resumed(
    as_user: Any, bob: Any, fleet: dict[str, KubeCluster]
) -> None:
    api = as_user(bob)
    for name in ("evicted", "resumed"):
        assert (
            api.post(CLUSTERS, {"name": name, "flavor": "h100"}, format="json").status_code == 201
        )
    run_admission_pass()
    evicted = ClusterRequest.objects.get(name="evicted")
    assert transition(evicted, State.QUEUED, reason="evicted")
    assert ClusterRequest.objects.get(name="evicted").kube_cluster is None
    resumed = ClusterRequest.objects.get(name="resumed")
    transition(resumed, State.PROVISIONING, reason="applied")
    transition(resumed, State.READY, reason="ready", ready_at=timezone.now())
    transition(resumed, State.SUSPENDED, reason="suspended")
    assert transition(resumed, State.QUEUED, reason="resumed")
    assert ClusterRequest.objects.get(name="resumed").kube_cluster == fleet["cloud"]
    # Room again on onprem, first in order: the resumed one still goes back to cloud.
    FlavorStock.objects.filter(kube_cluster=fleet["onprem"]).update(observed_free_gpus=16)
    run_admission_pass()
    assert ClusterRequest.objects.get(name="resumed").kube_cluster == fleet["cloud"]
    assert ClusterRequest.objects.get(name="evicted").kube_cluster == fleet["onprem"]


def test_the_request_page_says_where_it_runs(
    client: Any, as_user: Any, bob: Any, fleet: dict[str, KubeCluster]
) -> None:
    KubeCluster.objects.filter(pk=fleet["cloud"].pk).update(region="us-east")
    body = {"name": "p", "flavor": "h100", "region": "us-east"}
    assert as_user(bob).post(CLUSTERS, body, format="json").status_code == 201
    client.force_login(bob)
    waiting = client.get("/t/acme/clusters/p/").content.decode()
    assert "Asked to run in region <strong>us-east</strong>." in waiting
    run_admission_pass()
    placed = client.get("/t/acme/clusters/p/").content.decode()
    assert "Runs on Kubernetes cluster <strong>cloud</strong> (us-east)." in placed
