"""Every generated object validates (kubernetes-validate strict, CRD schemas closed to
unknown fields, operator rules) and carries what DESIGN "Cluster shapes" asks for."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
import yaml
from django.core.exceptions import ValidationError

from clusters.domain import shapes
from clusters.kinds.raycluster.manifests import raycluster
from clusters.kube import bundles, multikueue
from clusters.kube import labels as lbl
from clusters.kube.manifests import (
    cluster_manifests,
    kai_queue,
    kueue_objects,
    tenant_bundle,
    to_yaml,
)
from clusters.kube.queues import local_queue
from tenants.models import GpuFlavor, Quota, Tenant
from tests.clusters.kube.schemas import K8S_VERSION, crd_schema, validate_object

SHAPES = [
    "dev",
    "dev-3-workers",
    "prod-fixed",
    "prod-autoscaling",
    "fractional",
    "dev-kueue",
    "prod-kueue",
]


def test_validates_against_the_newest_kubernetes() -> None:
    assert K8S_VERSION.startswith("1.37")


@pytest.mark.parametrize("shape", SHAPES)
def test_every_cluster_shape_validates(shapes_by_name: Any, shape: str) -> None:
    cluster, kwargs = shapes_by_name[shape]
    for obj in cluster_manifests(cluster, **kwargs):
        validate_object(obj)


def test_each_tenant_bundle_object_validates(acme: Any) -> None:
    objects = tenant_bundle(acme, acme.quotas.all(), control_plane_namespace="gangway-system")
    kinds = [obj["kind"] for obj in objects]
    assert kinds[:4] == ["Namespace", "ServiceAccount", "ResourceQuota", "LimitRange"]
    assert kinds.count("NetworkPolicy") == 4
    for obj in objects:
        validate_object(obj)


def test_each_kueue_and_kai_object_validates(acme: Any, globex: Any) -> None:
    objects = kueue_objects(Tenant.objects.all(), GpuFlavor.objects.all(), Quota.objects.all())
    kinds = {obj["kind"] for obj in objects}
    assert kinds == {"WorkloadPriorityClass", "ResourceFlavor", "ClusterQueue"}
    objects.append(local_queue(acme))
    objects.append(kai_queue(acme, Quota.objects.all()))
    objects.append(kai_queue(acme, Quota.objects.all(), parent_queue="default-parent-queue"))
    for obj in objects:
        validate_object(obj)


def test_closed_schema_refuses_unknown_fields(shapes_by_name: Any) -> None:
    obj = raycluster(shapes_by_name["dev"][0])
    obj["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["gpuCount"] = 1
    with pytest.raises(jsonschema.ValidationError, match="gpuCount"):
        jsonschema.Draft7Validator(crd_schema("ray.io/v1", "RayCluster")).validate(obj)


def _worker_pod(obj: dict[str, Any]) -> dict[str, Any]:
    return obj["spec"]["workerGroupSpecs"][0]["template"]


def test_dev_worker_takes_one_gpu_and_a_node_slice(shapes_by_name: Any) -> None:
    obj = raycluster(shapes_by_name["dev"][0])
    group = obj["spec"]["workerGroupSpecs"][0]
    container = group["template"]["spec"]["containers"][0]
    # h100: 8 GPUs, 192 CPU, 1800 GiB per node -> 24 CPU and 225 GiB per GPU.
    expected = {"cpu": "24", "memory": "225Gi", "nvidia.com/gpu": "1"}
    assert container["resources"] == {"limits": expected, "requests": expected}
    assert group["rayStartParams"] == {"num-gpus": "1"}
    assert (group["replicas"], group["minReplicas"], group["maxReplicas"]) == (1, 1, 1)
    spec = group["template"]["spec"]
    assert spec["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    assert spec["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    ]
    assert obj["spec"]["enableInTreeAutoscaling"] is False
    assert "autoscalerOptions" not in obj["spec"]


def test_head_has_no_gpu_and_sees_none(shapes_by_name: Any) -> None:
    head = raycluster(shapes_by_name["prod-fixed"][0])["spec"]["headGroupSpec"]
    spec = head["template"]["spec"]
    container = spec["containers"][0]
    assert {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"} in container["env"]
    assert "nvidia.com/gpu" not in container["resources"]["limits"]
    assert "tolerations" not in spec and "nodeSelector" not in spec
    assert head["rayStartParams"] == {"dashboard-host": "0.0.0.0", "num-gpus": "0"}
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"gcs-server": 6379, "dashboard": 8265, "client": 10001}


def test_prod_worker_takes_the_whole_node(shapes_by_name: Any) -> None:
    obj = raycluster(shapes_by_name["prod-fixed"][0])
    group = obj["spec"]["workerGroupSpecs"][0]
    limits = group["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits == {"cpu": "190", "memory": "1792Gi", "nvidia.com/gpu": "8"}
    assert group["rayStartParams"] == {"num-gpus": "8"}
    assert (group["replicas"], group["minReplicas"], group["maxReplicas"]) == (2, 2, 2)


def test_prod_autoscaling(shapes_by_name: Any) -> None:
    obj = raycluster(shapes_by_name["prod-autoscaling"][0])
    group = obj["spec"]["workerGroupSpecs"][0]
    assert (group["replicas"], group["minReplicas"], group["maxReplicas"]) == (1, 0, 4)
    assert obj["spec"]["enableInTreeAutoscaling"] is True
    options = obj["spec"]["autoscalerOptions"]
    assert options["idleTimeoutSeconds"] == 300
    assert options["securityContext"]["allowPrivilegeEscalation"] is False
    assert {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"} in options["env"]


def test_fractional_worker_is_scheduled_by_kai(shapes_by_name: Any) -> None:
    cluster, kwargs = shapes_by_name["fractional"]
    obj = raycluster(cluster, **kwargs)
    template = _worker_pod(obj)
    assert template["metadata"]["annotations"] == {"gpu-fraction": "0.5"}
    assert template["metadata"]["labels"][lbl.KAI_QUEUE] == "gw-acme"
    assert obj["metadata"]["labels"][lbl.KAI_QUEUE] == "gw-acme"
    assert template["spec"]["schedulerName"] == "kai-scheduler"
    container = template["spec"]["containers"][0]
    assert "nvidia.com/gpu" not in container["resources"]["limits"]
    assert obj["spec"]["workerGroupSpecs"][0]["rayStartParams"] == {"num-gpus": "1"}
    # KAI sets the shared device's visibility itself; "void" would hide it. Its only
    # variables are the preemption notice's (docs/preemption.md).
    names = {e["name"] for e in container.get("env", [])}
    assert "NVIDIA_VISIBLE_DEVICES" not in names
    assert names <= {"GANGWAY_PODINFO_ANNOTATIONS", "GANGWAY_PREEMPTION_URL"}


def test_fraction_without_kai_is_refused(shapes_by_name: Any) -> None:
    cluster, _ = shapes_by_name["fractional"]
    with pytest.raises(ValueError, match="KAI"):
        raycluster(cluster)


def test_kueue_mode_labels_the_queue_and_priority(shapes_by_name: Any) -> None:
    cluster, kwargs = shapes_by_name["dev-kueue"]
    labels = raycluster(cluster, **kwargs)["metadata"]["labels"]
    assert labels[lbl.KUEUE_QUEUE_NAME] == "gangway"
    assert labels[lbl.KUEUE_PRIORITY_CLASS] == "dev"
    assert lbl.KUEUE_QUEUE_NAME not in raycluster(cluster)["metadata"]["labels"]


def test_every_object_carries_the_managed_labels(shapes_by_name: Any) -> None:
    cluster, _ = shapes_by_name["dev"]
    obj = raycluster(cluster)
    expected = {
        "app.kubernetes.io/managed-by": "gangway",
        "gangway.dev/tenant": "acme",
        "gangway.dev/cluster-id": "0",
        "gangway.dev/owner": "bob",
        "gangway.dev/kind": "dev",
    }
    assert obj["metadata"]["labels"] == expected
    assert obj["metadata"]["namespace"] == "gw-acme"
    assert obj["spec"]["headGroupSpec"]["template"]["metadata"]["labels"] == expected
    assert _worker_pod(obj)["metadata"]["labels"] == expected
    assert lbl.managed_selector() == "app.kubernetes.io/managed-by=gangway"


def test_image_default_and_override(shapes_by_name: Any, settings: Any) -> None:
    cluster, _ = shapes_by_name["dev"]
    assert raycluster(cluster)["spec"]["rayVersion"] == "2.49.2"
    obj = raycluster(cluster, image="rayproject/ray:2.50.0-gpu")
    assert obj["spec"]["rayVersion"] == "2.50.0"
    assert _worker_pod(obj)["spec"]["containers"][0]["image"] == "rayproject/ray:2.50.0-gpu"


def test_resource_quota_mirrors_the_tenant(acme: Any) -> None:
    objects = tenant_bundle(acme, acme.quotas.all(), control_plane_namespace="gangway-system")
    (quota,) = [o for o in objects if o["kind"] == "ResourceQuota"]
    hard = quota["spec"]["hard"]
    # acme: h100 16 (+8 borrowing) and l4 2 GPUs; 1000 CPU; 8000 GiB.
    assert hard["requests.nvidia.com/gpu"] == "26"
    assert hard["requests.cpu"] == hard["limits.cpu"] == "1000"
    assert hard["requests.memory"] == hard["limits.memory"] == "8000Gi"
    assert hard["services.nodeports"] == hard["services.loadbalancers"] == "0"
    assert hard["count/rayclusters.ray.io"] == "36"
    (namespace,) = [o for o in objects if o["kind"] == "Namespace"]
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "baseline"
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/warn"] == "restricted"
    (account,) = [o for o in objects if o["kind"] == "ServiceAccount"]
    assert account["automountServiceAccountToken"] is False


def test_control_plane_reaches_only_ray_ports(acme: Any) -> None:
    objects = tenant_bundle(acme, [], control_plane_namespace="ops")
    policies = {o["metadata"]["name"]: o["spec"] for o in objects if o["kind"] == "NetworkPolicy"}
    assert policies["default-deny-ingress"] == {"podSelector": {}, "policyTypes": ["Ingress"]}
    rule = policies["allow-control-plane-to-ray"]["ingress"][0]
    assert rule["from"][0]["namespaceSelector"]["matchLabels"] == {
        "kubernetes.io/metadata.name": "ops"
    }
    # The dashboard, Ray client and a head's notebook (docs/notebooks.md).
    assert sorted(p["port"] for p in rule["ports"]) == [8265, 8888, 10001]


def test_cluster_queue_quota_per_flavor(acme: Any, h100: Any, l4: Any, settings: Any) -> None:
    objects = kueue_objects([acme], [h100, l4], Quota.objects.all())
    (queue,) = [o for o in objects if o["kind"] == "ClusterQueue"]
    spec = queue["spec"]
    assert spec["cohortName"] == "default"
    assert spec["fairSharing"] == {"weight": "1"}
    flavors = {f["name"]: f["resources"] for f in spec["resourceGroups"][0]["flavors"]}
    assert list(flavors) == ["h100", "l4", "ray-heads"]
    h100_res = {r["name"]: r for r in flavors["h100"]}
    assert h100_res["nvidia.com/gpu"]["nominalQuota"] == "16"
    assert h100_res["nvidia.com/gpu"]["borrowingLimit"] == "8"
    assert h100_res["cpu"]["nominalQuota"] == "384"  # 16 GPUs x 24 CPU each
    # The LocalQueue is in the tenant's namespace bundle, in Kueue mode only.
    assert not [o for o in bundles.tenant_bundle_objects(acme) if o["kind"] == "LocalQueue"]
    settings.QUEUE_MODE = "kueue"
    (local,) = [o for o in bundles.tenant_bundle_objects(acme) if o["kind"] == "LocalQueue"]
    assert local["metadata"]["namespace"] == "gw-acme"
    assert local["spec"]["clusterQueue"] == queue["metadata"]["name"]
    names = {o["metadata"]["name"]: o.get("value") for o in objects}
    assert names["dev"] < names["prod"]


def test_cluster_queue_carries_a_lending_limit_where_one_is_set(
    acme: Any, h100: Any, l4: Any
) -> None:
    Quota.objects.filter(tenant=acme, flavor=h100).update(lend_limit=4)
    (queue,) = [
        o
        for o in kueue_objects([acme], [h100, l4], Quota.objects.all())
        if o["kind"] == "ClusterQueue"
    ]
    flavors = {f["name"]: f["resources"] for f in queue["spec"]["resourceGroups"][0]["flavors"]}
    h100_res = {r["name"]: r for r in flavors["h100"]}
    assert h100_res["nvidia.com/gpu"]["lendingLimit"] == "4"
    assert h100_res["cpu"]["lendingLimit"] == "96"  # the CPU that 4 GPUs bring
    assert all("lendingLimit" not in r for r in flavors["l4"])  # none set: lends all


def test_gpu_resource_flavors_keep_heads_off_gpu_nodes(h100: Any) -> None:
    (flavor,) = [o for o in kueue_objects([], [h100], []) if o["metadata"]["name"] == "h100"]
    assert flavor["spec"]["nodeLabels"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    assert flavor["spec"]["nodeTaints"] == [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]


def test_kai_queue_has_every_resource(acme: Any) -> None:
    spec = kai_queue(acme, Quota.objects.all())["spec"]
    assert spec["resources"]["gpu"] == {"quota": 18, "overQuotaWeight": 1.0, "limit": 26}
    assert set(spec["resources"]) == {"gpu", "cpu", "memory"}
    assert spec["resources"]["cpu"]["quota"] == 1_000_000  # millicores


def test_a_mig_flavors_quota_is_its_device_classs_not_nvidia_gpus(acme: Any) -> None:
    from tests.factories import GpuFlavorFactory

    mig = GpuFlavorFactory(
        name="h100-1g", gpus_per_node=56, device_mode="mig", mig_profile="1g.10gb"
    )
    before = tenant_bundle(acme, acme.quotas.all(), control_plane_namespace="gangway-system")
    gpus_before = before[2]["spec"]["hard"]["requests.nvidia.com/gpu"]
    Quota.objects.create(tenant=acme, flavor=mig, gpus=14, borrow_limit=7)
    objects = tenant_bundle(acme, acme.quotas.all(), control_plane_namespace="gangway-system")
    (rq,) = [o for o in objects if o["kind"] == "ResourceQuota"]
    validate_object(rq)
    assert rq["spec"]["hard"]["mig.nvidia.com.deviceclass.resource.k8s.io/devices"] == "21"
    assert rq["spec"]["hard"]["requests.nvidia.com/gpu"] == gpus_before  # slices are no GPUs
    # KAI's queue holds the extended resource's GPUs only: it never runs a DRA worker.
    assert kai_queue(acme, Quota.objects.select_related("flavor"))["spec"]["resources"]["gpu"] == {
        "quota": 18,
        "overQuotaWeight": 1.0,
        "limit": 26,
    }


def test_operator_rules_refused(shapes_by_name: Any, h100: Any) -> None:
    cluster, _ = shapes_by_name["dev"]
    group = shapes.worker_groups(kind="dev", flavor=h100, workers=1)[0]
    many = [
        shapes.WorkerGroup(f"g{i}", 1, 1, 1, group.resources)
        for i in range(shapes.MAX_WORKER_GROUPS + 1)
    ]
    with pytest.raises(ValidationError, match="18 worker groups"):
        raycluster(cluster, groups=many)
    assert len(raycluster(cluster, groups=many[:17])["spec"]["workerGroupSpecs"]) == 17
    for bad, message in [
        (shapes.WorkerGroup("GPU_Workers", 1, 1, 1, group.resources), "DNS label"),
        (shapes.WorkerGroup("head", 1, 1, 1, group.resources), "head"),
        (shapes.WorkerGroup("w", 5, 1, 3, group.resources), "replicas"),
    ]:
        with pytest.raises(ValidationError, match=message):
            raycluster(cluster, groups=[bad])


def test_deterministic_and_yaml_round_trip(shapes_by_name: Any, acme: Any) -> None:
    cluster, _ = shapes_by_name["prod-autoscaling"]
    objects = [
        *tenant_bundle(acme, acme.quotas.all(), control_plane_namespace="gangway-system"),
        *cluster_manifests(cluster),
    ]
    text = to_yaml(objects)
    assert text == to_yaml(
        [
            *tenant_bundle(acme, acme.quotas.all(), control_plane_namespace="gangway-system"),
            *cluster_manifests(cluster),
        ]
    )
    assert list(yaml.safe_load_all(text)) == objects
    assert "&id" not in text


def test_multikueue_objects_validate_and_keep_the_order(acme: Any, globex: Any, h100: Any) -> None:
    """The manager's objects (clusters/kube/multikueue.py) against Kueue v0.19's CRDs: a
    Secret and MultiKueueCluster per worker, a config per tenant listing its workers in
    the order given, its check; a tenant without workers gets the check only."""
    kubeconfig = {"apiVersion": "v1", "kind": "Config", "clusters": [], "users": []}
    objects = multikueue.manager_objects(
        {"w2": kubeconfig, "w1": kubeconfig}, [(acme, ["w2", "w1"]), (globex, [])]
    )
    assert [(o["kind"], o["metadata"]["name"]) for o in objects] == [
        ("Secret", "gangway-multikueue-w1"),
        ("MultiKueueCluster", "w1"),
        ("Secret", "gangway-multikueue-w2"),
        ("MultiKueueCluster", "w2"),
        ("MultiKueueConfig", "gangway-multikueue-gw-acme"),
        ("AdmissionCheck", "gangway-multikueue-gw-acme"),
        ("AdmissionCheck", "gangway-multikueue-gw-globex"),
    ]
    for obj in objects:
        validate_object(obj)
    config = objects[4]
    assert config["spec"]["clusters"] == ["w2", "w1"]
    assert objects[0]["metadata"]["namespace"] == "kueue-system"


def test_cluster_queues_of_a_manager_and_of_a_worker(acme: Any, h100: Any, l4: Any) -> None:
    """The manager's queue runs the tenant's MultiKueue check on every flavor; a worker's
    has no GPUs of its own and borrows from the worker's Cohort, which holds what the
    worker has, at most the tenant's quota (borrowing included)."""
    h100.max_node_count = h100.node_count + 4  # a flavor that grows: the capacity check
    h100.save()
    manager = kueue_objects([acme], [h100, l4], Quota.objects.all(), dispatch={acme.pk: "mk"})
    (queue,) = [o for o in manager if o["kind"] == "ClusterQueue"]
    assert queue["spec"]["admissionChecksStrategy"] == {"admissionChecks": [{"name": "mk"}]}
    assert not [o for o in manager if o["kind"] == "ProvisioningRequestConfig"]
    worker = kueue_objects([acme], [h100, l4], Quota.objects.all(), capacity={"h100": 8})
    (queue,) = [o for o in worker if o["kind"] == "ClusterQueue"]
    validate_object(queue)
    flavors = {f["name"]: f["resources"] for f in queue["spec"]["resourceGroups"][0]["flavors"]}
    gpus = {name: res[2] for name, res in flavors.items()}
    assert gpus["h100"] == {"name": "nvidia.com/gpu", "nominalQuota": "0", "borrowingLimit": "8"}
    assert gpus["l4"]["borrowingLimit"] == "0"  # the worker lists no L4 nodes
    assert queue["spec"]["cohortName"] == "gangway-worker-capacity"
    assert queue["spec"]["preemption"]["reclaimWithinCohort"] == "Never"
    (cohort,) = [o for o in worker if o["kind"] == "Cohort"]
    validate_object(cohort)
    pool = {f["name"]: f["resources"] for f in cohort["spec"]["resourceGroups"][0]["flavors"]}
    assert pool["h100"][2] == {"name": "nvidia.com/gpu", "nominalQuota": "8"}
    assert pool["l4"][2]["nominalQuota"] == "0"
    strategy = queue["spec"]["admissionChecksStrategy"]["admissionChecks"]
    assert strategy == [{"name": "gangway-capacity", "onFlavors": ["h100"]}]
