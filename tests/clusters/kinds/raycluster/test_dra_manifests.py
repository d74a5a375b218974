"""Workers of DRA flavors (clusters.kinds.raycluster.manifests with clusters.kube.dra):
each GPU worker claims its GPUs from its group's ResourceClaimTemplate, which is applied
before the Ray object; no ``nvidia.com/gpu`` anywhere; the head stays blind to GPUs."""

from __future__ import annotations

from typing import Any

import pytest

from clusters.kinds.raycluster.manifests import claim_templates, manifests
from clusters.kube import dra
from clusters.kube.manifests import GPU, cluster_manifests
from tenants.models import DeviceMode
from tests.factories import GpuFlavorFactory

pytestmark = pytest.mark.django_db

MIG_SELECTOR = 'device.attributes["gpu.nvidia.com"].profile == "1g.10gb"'
H100_SELECTOR = 'device.attributes["gpu.nvidia.com"].productName == "NVIDIA H100 80GB HBM3"'


@pytest.fixture
def mig() -> Any:
    """H100 1g.10gb slices: seven per GPU, 56 per node."""
    return GpuFlavorFactory(
        name="h100-1g",
        gpus_per_node=56,
        device_mode=DeviceMode.MIG,
        mig_profile="1g.10gb",
    )


@pytest.fixture
def whole() -> Any:
    """Whole H100s through DRA, eight per node."""
    return GpuFlavorFactory(
        name="h100-dra", device_mode=DeviceMode.DRA, device_selector=H100_SELECTOR
    )


def _worker(obj: dict[str, Any]) -> dict[str, Any]:
    (group,) = obj["spec"]["workerGroupSpecs"]
    return dict(group)


def _every_container(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [*spec.get("initContainers", []), *spec["containers"]]


def test_a_mig_dev_worker_claims_one_slice_of_its_profile(make_cluster: Any, mig: Any) -> None:
    row = make_cluster(flavor=mig, name="bob-mig", pk=7)
    template, rc = manifests(row)
    assert template == {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {
            "name": "bob-mig-h100-1g-workers-gpus",
            "namespace": row.tenant.namespace,
            "labels": {
                "app.kubernetes.io/managed-by": "gangway",
                "gangway.dev/cluster-id": "7",
                "gangway.dev/kind": "dev",
                "gangway.dev/object": "bob-mig",
                "gangway.dev/owner": "bob",
                "gangway.dev/tenant": "acme",
            },
        },
        "spec": {
            # Its claims carry the request's labels: what the devices read lists them by.
            "metadata": {
                "labels": {
                    "app.kubernetes.io/managed-by": "gangway",
                    "gangway.dev/cluster-id": "7",
                    "gangway.dev/kind": "dev",
                    "gangway.dev/owner": "bob",
                    "gangway.dev/tenant": "acme",
                }
            },
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "gpus",
                            "exactly": {
                                "deviceClassName": "mig.nvidia.com",
                                "allocationMode": "ExactCount",
                                "count": 1,
                                "selectors": [{"cel": {"expression": MIG_SELECTOR}}],
                            },
                        }
                    ]
                }
            },
        },
    }
    worker = _worker(rc)
    pod = worker["template"]["spec"]
    assert pod["resourceClaims"] == [
        {"name": "gpus", "resourceClaimTemplateName": "bob-mig-h100-1g-workers-gpus"}
    ]
    (container,) = pod["containers"]
    assert container["resources"]["claims"] == [{"name": "gpus"}]
    assert GPU not in container["resources"]["limits"]
    assert GPU not in container["resources"]["requests"]
    # KubeRay cannot count a claim's devices: Ray is told.
    assert worker["rayStartParams"]["num-gpus"] == "1"


def test_a_prod_worker_claims_every_gpu_of_its_node(
    make_cluster: Any, whole: Any, alice: Any
) -> None:
    row = make_cluster(flavor=whole, owner=alice, name="train", kind="prod", workers=2)
    (template,) = claim_templates(row)
    (request,) = template["spec"]["spec"]["devices"]["requests"]
    assert request["exactly"] == {
        "deviceClassName": "gpu.nvidia.com",
        "allocationMode": "ExactCount",
        "count": 8,
        "selectors": [{"cel": {"expression": H100_SELECTOR}}],
    }
    worker = _worker(manifests(row)[-1])
    assert worker["rayStartParams"]["num-gpus"] == "8"
    assert worker["replicas"] == 2  # one claim per pod, from the one template
    assert all(
        GPU not in c["resources"]["limits"] for c in _every_container(worker["template"]["spec"])
    )


def test_the_head_has_no_claim_and_sees_no_gpu(make_cluster: Any, mig: Any) -> None:
    rc = manifests(make_cluster(flavor=mig))[-1]
    head = rc["spec"]["headGroupSpec"]["template"]["spec"]
    assert "resourceClaims" not in head
    (container,) = head["containers"]
    assert {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"} in container["env"]
    assert "claims" not in container["resources"]
    assert rc["spec"]["headGroupSpec"]["rayStartParams"]["num-gpus"] == "0"


def test_extended_resource_flavors_get_no_template(make_cluster: Any) -> None:
    row = make_cluster()
    assert claim_templates(row) == []
    (rc,) = manifests(row)
    assert "resourceClaims" not in _worker(rc)["template"]["spec"]


def test_jobs_and_services_apply_the_same_templates_first(make_cluster: Any, mig: Any) -> None:
    from clusters.models import Job, Service

    job = make_cluster(flavor=mig, name="bob-job", workload="job")
    job._job_details = Job(entrypoint="python train.py")
    template, rayjob = cluster_manifests(job)
    assert template["metadata"]["name"] == dra.template_name("bob-job", "h100-1g-workers")
    pod = rayjob["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]["spec"]
    assert pod["resourceClaims"][0]["resourceClaimTemplateName"] == template["metadata"]["name"]

    service = make_cluster(flavor=mig, name="bob-svc", workload="service")
    service._service_details = Service(serve_config="applications: []\n")
    template, rayservice = cluster_manifests(service)
    assert template["kind"] == "ResourceClaimTemplate" and rayservice["kind"] == "RayService"
    pod = rayservice["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]["template"]["spec"]
    assert pod["resourceClaims"][0]["resourceClaimTemplateName"] == "bob-svc-h100-1g-workers-gpus"


def test_container_gpus_init_container_shares_the_claim(
    make_cluster: Any, mig: Any, settings: Any
) -> None:
    row = make_cluster(flavor=mig, container_gpus=True)
    rc = manifests(row, container_profile="profiles/gangway-podman.json")[-1]
    pod = _worker(rc)["template"]["spec"]
    (init,) = pod["initContainers"]
    assert init["resources"]["claims"] == [{"name": "gpus"}]
    assert GPU not in init["resources"]["limits"] and GPU not in init["resources"]["requests"]
    assert pod["containers"][0]["resources"]["claims"] == [{"name": "gpus"}]
