"""A flavor's topology in Kueue mode and for KAI: the Topology objects, the ResourceFlavor
naming its Topology, the worker pod sets' and the top owner's annotations (all validated
against the CRDs), and the domain read back from Kueue's topology assignment."""

from __future__ import annotations

from typing import Any

import pytest

from clusters.kinds.raycluster.manifests import raycluster
from clusters.kube import bundles, topology_queues
from clusters.kube.manifests import cluster_manifests, kueue_objects
from clusters.models import Job, Service
from tenants.models import GpuFlavor, Quota, Tenant
from tests.clusters.kube.schemas import validate_object

BLOCK = "network.topology.kubernetes.io/block"
RACK = "network.topology.kubernetes.io/rack"
HOST = "kubernetes.io/hostname"


@pytest.fixture
def racked(h100: Any) -> Any:
    h100.topology = [BLOCK, RACK, HOST]
    h100.save()
    return h100


def _worker_notes(obj: dict[str, Any]) -> dict[str, str]:
    template = obj["spec"]["workerGroupSpecs"][0]["template"]
    return dict(template.get("metadata", {}).get("annotations", {}))


def test_kueue_mode_writes_a_topology_per_flavor_with_levels_before_its_flavor(
    acme: Any, racked: Any, l4: Any
) -> None:
    objects = kueue_objects(Tenant.objects.all(), GpuFlavor.objects.all(), Quota.objects.all())
    for obj in objects:
        validate_object(obj)
    topologies = [o for o in objects if o["kind"] == "Topology"]
    assert [t["metadata"]["name"] for t in topologies] == ["h100"]
    assert topologies[0]["spec"]["levels"] == [
        {"nodeLabel": BLOCK},
        {"nodeLabel": RACK},
        {"nodeLabel": HOST},
    ]
    flavors = {o["metadata"]["name"]: o for o in objects if o["kind"] == "ResourceFlavor"}
    assert flavors["h100"]["spec"]["topologyName"] == "h100"
    assert flavors["h100"]["spec"]["nodeLabels"]  # Kueue wants them on a TAS flavor
    assert "topologyName" not in flavors["l4"]["spec"]
    assert "topologyName" not in flavors["ray-heads"]["spec"]
    kinds = [o["kind"] for o in objects]
    assert kinds.index("Topology") < kinds.index("ResourceFlavor")


@pytest.mark.parametrize(
    ("mode", "key"),
    [
        ("required", "kueue.x-k8s.io/podset-required-topology"),
        ("preferred", "kueue.x-k8s.io/podset-preferred-topology"),
    ],
)
def test_a_gang_asking_a_level_asks_kueue_for_it_on_its_workers(
    make_cluster: Any, alice: Any, racked: Any, mode: str, key: str
) -> None:
    gang = make_cluster(
        owner=alice, name="train", kind="prod", workers=4, topology_level=RACK, topology_mode=mode
    )
    obj = raycluster(gang, queue_mode="kueue")
    validate_object(obj)
    assert _worker_notes(obj) == {key: RACK}
    head = obj["spec"]["headGroupSpec"]["template"]
    assert "annotations" not in head.get("metadata", {})  # the head flavor is no TAS flavor
    # Built-in mode: Kueue is not there to read it.
    assert _worker_notes(raycluster(gang)) == {}


def test_workers_on_a_tas_flavor_that_ask_nothing_are_unconstrained(
    make_cluster: Any, racked: Any, l4: Any
) -> None:
    # Kueue lets no pod set that asks nothing onto a TAS flavor of a queue with other
    # flavors (the heads'): "Flavor "h100" supports only TopologyAwareScheduling".
    obj = raycluster(make_cluster(), queue_mode="kueue")
    assert _worker_notes(obj) == {"kueue.x-k8s.io/podset-unconstrained-topology": "true"}
    assert _worker_notes(raycluster(make_cluster(flavor=l4), queue_mode="kueue")) == {}


def test_kai_gets_a_topology_per_flavor_and_the_gangs_placement_on_its_top_owner(
    acme: Any, make_cluster: Any, alice: Any, racked: Any, settings: Any
) -> None:
    settings.KAI_ENABLED = True
    objects = bundles.tenant_bundle_objects(acme)
    kai = [o for o in objects if o["apiVersion"] == "kai.scheduler/v1alpha1"]
    assert [(o["kind"], o["metadata"]["name"]) for o in kai] == [("Topology", "h100")]
    for obj in kai:
        validate_object(obj)
    gang = make_cluster(owner=alice, name="train", kind="prod", workers=4, topology_level=RACK)
    obj = raycluster(gang, kai_enabled=True)
    validate_object(obj)
    assert obj["metadata"]["annotations"] == {
        "kai.scheduler/topology": "h100",
        "kai.scheduler/topology-required-placement": RACK,
    }
    preferred = make_cluster(
        owner=alice, name="train", kind="prod", workers=4, topology_level=RACK,
        topology_mode="preferred",
    )  # fmt: skip
    notes = raycluster(preferred, kai_enabled=True)["metadata"]["annotations"]
    assert notes["kai.scheduler/topology-preferred-placement"] == RACK
    assert "annotations" not in raycluster(make_cluster(), kai_enabled=True)["metadata"]


def test_a_job_or_service_carries_kais_placement_on_itself_its_top_owner(
    make_cluster: Any, alice: Any, racked: Any
) -> None:
    wanted = {
        "kai.scheduler/topology": "h100",
        "kai.scheduler/topology-required-placement": RACK,
    }
    job = make_cluster(
        owner=alice, name="train", kind="prod", workers=2, topology_level=RACK, workload="job"
    )
    job._job_details = Job(entrypoint="python train.py")
    (rayjob,) = [o for o in cluster_manifests(job, kai_enabled=True) if o["kind"] == "RayJob"]
    assert rayjob["metadata"]["annotations"] == wanted
    service = make_cluster(
        owner=alice, name="serve", kind="prod", workers=2, topology_level=RACK,
        workload="service",
    )  # fmt: skip
    service._service_details = Service(serve_config="applications:\n  - import_path: a:b\n")
    (rs,) = [
        o for o in cluster_manifests(service, kai_enabled=True, queue_mode="kueue")
        if o["kind"] == "RayService"
    ]  # fmt: skip
    assert rs["metadata"]["annotations"] == {**wanted, "kueue.x-k8s.io/elastic-job": "true"}
    # Built-in mode: KAI's ask alone, and no elastic gate on the pods.
    (rs,) = [o for o in cluster_manifests(service, kai_enabled=True) if o["kind"] == "RayService"]
    assert rs["metadata"]["annotations"] == wanted
    pod = rs["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]["template"]["spec"]
    assert "schedulingGates" not in pod


def _admitted(assignment: dict[str, Any]) -> dict[str, Any]:
    return {
        "status": {
            "admission": {
                "podSetAssignments": [
                    {"name": "head", "count": 1},
                    {"name": "gpu", "count": 4, "topologyAssignment": assignment},
                ]
            }
        }
    }


def test_the_domain_is_read_from_kueues_assignment_in_each_of_its_encodings() -> None:
    def no_nodes(name: str) -> dict[str, str]:
        raise AssertionError(f"no node read expected, asked {name}")

    by_levels = {
        "levels": [BLOCK, RACK],
        "slices": [
            {
                "domainCount": 1,
                "valuesPerLevel": [{"universal": "b-1"}, {"individual": {"roots": ["r-3"]}}],
                "podCounts": {"universal": 4},
            }
        ],
    }
    assert topology_queues.assigned_domain(_admitted(by_levels), RACK, no_nodes) == "r-3"
    assert topology_queues.assigned_domain(_admitted(by_levels), BLOCK, no_nodes) == "b-1"
    assert topology_queues.assigned_domain(_admitted(by_levels), "", no_nodes) == ""

    hosts = {"n-10": "r-1", "n-11": "r-1", "n-20": "r-2"}
    by_hosts = {
        "levels": [HOST],
        "slices": [
            {
                "domainCount": 2,
                "valuesPerLevel": [{"individual": {"prefix": "n-", "roots": ["10", "11"]}}],
                "podCounts": {"individual": [3, 1]},
            }
        ],
    }

    def labels(name: str) -> dict[str, str]:
        return {RACK: hosts[name]}

    assert topology_queues.assigned_domain(_admitted(by_hosts), RACK, labels) == "r-1"
    # Spread over two racks (a preferred level): pinned to none.
    by_hosts["slices"][0]["valuesPerLevel"][0]["individual"]["roots"] = ["10", "20"]
    assert topology_queues.assigned_domain(_admitted(by_hosts), RACK, labels) == ""
    assert topology_queues.assigned_domain({"status": {}}, RACK, labels) == ""
