"""Manifests of a request that accepts several flavors.

Where the control plane chose (the built-in queue), the workers' nodeSelector is the
product of the flavor it was admitted on, as for any request. Where Kueue chooses, the
workers carry a required node affinity over the products of every accepted flavor and
ask for the smallest CPU and memory slice of them; the ClusterQueues let Kueue try the
next flavor before preempting, as the built-in pass does.
"""

from __future__ import annotations

from typing import Any

from clusters.kube import quantities as q
from clusters.kube.manifests import cluster_manifests, kueue_objects
from tenants.models import GpuFlavor, Quota, Tenant
from tests.clusters.kube.schemas import validate_object


def _worker(obj: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = obj["spec"]["workerGroupSpecs"][0]["template"]["spec"]
    return spec


def test_builtin_mode_selects_the_flavor_it_was_admitted_on(make_cluster: Any, l4: Any) -> None:
    cluster = make_cluster(flavor=l4, accepted_flavors=["h100", "l4"])
    (obj,) = cluster_manifests(cluster)
    validate_object(obj)
    worker = _worker(obj)
    assert worker["nodeSelector"] == {q.GPU_PRODUCT_LABEL: "NVIDIA-L4"}
    assert "affinity" not in worker


def test_kueue_mode_leaves_the_choice_to_kueue(make_cluster: Any, h100: Any, l4: Any) -> None:
    cluster = make_cluster(accepted_flavors=["h100", "l4"])
    (obj,) = cluster_manifests(cluster, queue_mode="kueue")
    validate_object(obj)
    worker = _worker(obj)
    assert "nodeSelector" not in worker
    terms = worker["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"] == [
        {
            "matchExpressions": [
                {
                    "key": q.GPU_PRODUCT_LABEL,
                    "operator": "In",
                    "values": [h100.gpu_product, "NVIDIA-L4"],
                }
            ]
        }
    ]
    # One pod template for both: l4's smaller slice, so that it fits an l4 node too.
    (alone,) = cluster_manifests(make_cluster(flavor=l4), queue_mode="kueue")
    limits = worker["containers"][0]["resources"]["limits"]
    assert limits == _worker(alone)["containers"][0]["resources"]["limits"]
    assert limits[q.GPU] == "1"
    # Admitted on l4, the object stays the same (Kueue must not see its template change).
    (admitted,) = cluster_manifests(
        make_cluster(flavor=l4, accepted_flavors=["h100", "l4"]), queue_mode="kueue"
    )
    assert admitted == obj
    # One flavor in Kueue mode: the nodeSelector as always.
    (single,) = cluster_manifests(make_cluster(accepted_flavors=["h100"]), queue_mode="kueue")
    assert _worker(single)["nodeSelector"] == {q.GPU_PRODUCT_LABEL: h100.gpu_product}


def test_cluster_queues_try_the_next_flavor_before_preempting(acme: Any) -> None:
    objects = kueue_objects(Tenant.objects.all(), GpuFlavor.objects.all(), Quota.objects.all())
    (queue,) = [o for o in objects if o["kind"] == "ClusterQueue"]
    validate_object(queue)
    assert queue["spec"]["flavorFungibility"] == {
        "whenCanBorrow": "MayStopSearch",
        "whenCanPreempt": "TryNextFlavor",
    }
    names = [f["name"] for f in queue["spec"]["resourceGroups"][0]["flavors"]]
    assert names[:2] == ["h100", "l4"]
