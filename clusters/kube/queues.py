"""Queue objects for Kueue mode and for KAI fractional sharing: pure, rows in, dicts out.

Kueue: a ResourceFlavor per flavor (a flavor with topology levels names its Topology:
:mod:`clusters.kube.topology_queues`) plus one for Ray heads, a ClusterQueue per tenant,
a LocalQueue per namespace, the ``dev``/``prod`` priority classes and the cohort tree.
KAI: a Queue per tenant for fractional dev GPUs. Heads get their own flavor because a
head given a GPU flavor would be put on a GPU node, taking room a whole-node worker
needs: GPU flavors declare the GPU nodes' taint, which heads do not tolerate, and no
``tolerations`` of their own (Kueue would inject them); workers bring their own.

DRA flavors' GPUs are claimed devices, which Kueue counts under the logical resource its
Configuration's ``resources.deviceClassMappings`` maps their DeviceClass to: gangway's
convention is one resource per class, named as the class (:func:`device_class_mappings`
is the stanza Kueue must carry; ``manage.py kubecluster kueue-config`` prints it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import timedelta
from decimal import Decimal
from typing import Any

from clusters.domain import shapes
from clusters.kube import labels as lbl
from clusters.kube import quantities as q
from clusters.kube import topology_queues
from clusters.kube.priority_classes import KIND_PRIORITIES, kueue_priority_classes

Manifest = dict[str, Any]

GPU = q.GPU
KUEUE_API = "kueue.x-k8s.io/v1beta2"
KAI_API = "scheduling.run.ai/v2"
KAI_SCHEDULER = "kai-scheduler"
LOCAL_QUEUE_NAME = "gangway"
HEAD_FLAVOR = "ray-heads"
# On a MultiKueue worker, every tenant's ClusterQueue sits in this one Cohort, which holds
# what the worker has: the tenants together are never admitted past it.
WORKER_COHORT = "gangway-worker-capacity"
# Production outranks dev: a prod gang may preempt dev clusters, never the reverse.
PRIORITIES = KIND_PRIORITIES
# Capacity on demand in Kueue mode: one AdmissionCheck (with its ProvisioningRequest
# config) that the ClusterQueues run for the flavors whose node group can grow.
CAPACITY_CHECK = "gangway-capacity"
PROVISIONING_CONTROLLER = "kueue.x-k8s.io/provisioning-request"
ATOMIC_SCALE_UP = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
KAI_UNLIMITED = -1


def _labels() -> dict[str, str]:
    return {lbl.MANAGED_BY: lbl.MANAGER}


def cluster_queue_name(tenant: Any) -> str:
    """A tenant's ClusterQueue is named after its (unique) namespace."""
    return str(tenant.namespace)


def kai_queue_name(tenant: Any) -> str:
    """A tenant's KAI queue is named after its (unique) namespace."""
    return str(tenant.namespace)


def default_max_clusters(total_gpus: int) -> int:
    """The backstop count of clusters (and so heads) a tenant may hold: a GPU each plus ten."""
    return total_gpus + 10


def priority_classes(platform_classes: Iterable[Any] = ()) -> list[Manifest]:
    """WorkloadPriorityClasses ``dev`` and ``prod``, and one per platform priority class
    and kind (requests point at them by label; :mod:`clusters.kube.priority_classes`)."""
    return kueue_priority_classes(platform_classes)


def resource_flavor(flavor: Any) -> Manifest:
    """The ResourceFlavor of a catalogue flavor: its product label and its nodes' taint."""
    spec = shapes.flavor_spec(flavor)
    return {
        "apiVersion": KUEUE_API,
        "kind": "ResourceFlavor",
        "metadata": {"name": spec.name, "labels": _labels()},
        "spec": {
            "nodeLabels": {q.GPU_PRODUCT_LABEL: spec.gpu_product},
            "nodeTaints": [{"key": GPU, "effect": "NoSchedule"}],
        },
    }


def head_flavor() -> Manifest:
    """The ResourceFlavor of the untainted CPU nodes where Ray heads run."""
    return {
        "apiVersion": KUEUE_API,
        "kind": "ResourceFlavor",
        "metadata": {"name": HEAD_FLAVOR, "labels": _labels()},
        "spec": {},
    }


def device_resource(spec: shapes.FlavorSpec) -> str:
    """The resource Kueue counts a flavor's GPUs under: ``nvidia.com/gpu``, or for a DRA
    flavor the logical resource its DeviceClass is mapped to (named as the class)."""
    return spec.device_class or GPU


def gpu_resources(flavors: Iterable[Any]) -> list[str]:
    """Every GPU resource the ClusterQueues cover: ``nvidia.com/gpu``, then the DRA
    flavors' device resources, sorted."""
    dra = {device_resource(shapes.flavor_spec(f)) for f in flavors} - {GPU}
    return [GPU, *sorted(dra)]


def device_class_mappings(flavors: Iterable[Any]) -> Manifest:
    """The part of Kueue's Configuration (``config.kueue.x-k8s.io/v1beta2``) that gangway's
    ClusterQueues need: each DRA flavor's DeviceClass mapped to the resource of its name.
    Kueue reads it at start, so a new device class in the catalogue means a restart."""
    classes = gpu_resources(flavors)[1:]
    return {
        "resources": {
            "deviceClassMappings": [{"name": dc, "deviceClassNames": [dc]} for dc in classes]
        }
    }


def admission_fair_sharing(flavors: Iterable[Any], half_life: timedelta) -> Manifest:
    """The part of Kueue's Configuration that turns on Admission Fair Sharing with
    gangway's half-life (``FAIR_SHARE_HALF_LIFE_HOURS``): usage sampled every five minutes
    (Kueue's default), counted in GPUs only, since CPU cores and memory bytes summed
    beside them would swamp them. Kueue orders the LocalQueues of one ClusterQueue by it
    (docs/capacity.md says what that means for gangway's one LocalQueue per tenant)."""
    minutes = round(half_life.total_seconds() / 60)
    text = f"{minutes // 60}h" if minutes % 60 == 0 else f"{minutes}m"
    weights: dict[str, float] = {"cpu": 0, "memory": 0}
    weights.update(dict.fromkeys(gpu_resources(flavors), 1))
    return {
        "admissionFairSharing": {
            "usageHalfLifeTime": text,
            "usageSamplingInterval": "5m",
            "resourceWeights": weights,
        }
    }


def _quota_map(quotas: Iterable[Any]) -> dict[tuple[int, int], Any]:
    return {(int(quota.tenant_id), int(quota.flavor_id)): quota for quota in quotas}


def _flavor_entry(
    spec: shapes.FlavorSpec,
    gpus: int,
    borrow: int,
    lend: int | None = None,
    *,
    covered: Iterable[str] = (GPU,),
) -> Manifest:
    # CPU and memory come with the GPUs: the share of a node that each GPU brings.
    cpu_per_gpu = Decimal(spec.cpu_per_node) / spec.gpus_per_node
    mem_per_gpu = Decimal(spec.memory_per_node_gib) / spec.gpus_per_node

    def entry(name: str, nominal: str, borrowing: str, lending: str | None) -> Manifest:
        out = {"name": name, "nominalQuota": nominal, "borrowingLimit": borrowing}
        if lending is not None:  # absent: the whole nominal quota may be lent
            out["lendingLimit"] = lending
        return out

    def cpu(n: int) -> str:
        return q.cpu(_round(cpu_per_gpu * n))

    def memory(n: int) -> str:
        return q.memory_gib(_round(mem_per_gpu * n))

    def devices(name: str) -> Manifest:
        # The flavor's own GPU resource has its quota; the others (listed because every
        # flavor of a group lists every covered resource) have none.
        n = int(name == device_resource(spec))
        return entry(name, q.count(gpus * n), q.count(borrow * n), _count(lend, n))

    return {
        "name": spec.name,
        "resources": [
            entry("cpu", cpu(gpus), cpu(borrow), None if lend is None else cpu(lend)),
            entry("memory", memory(gpus), memory(borrow), None if lend is None else memory(lend)),
            *(devices(name) for name in covered),
        ],
    }


def _count(lend: int | None, n: int) -> str | None:
    return None if lend is None else q.count(lend * n)


def _round(value: Decimal) -> Decimal:
    return shapes.floor_to(value, "0.001")


def growable(flavors: Iterable[Any]) -> list[str]:
    """Names of the flavors whose node group can grow, sorted."""
    return sorted(str(f.name) for f in flavors if getattr(f, "can_grow", False))


def capacity_check_objects() -> list[Manifest]:
    """The ProvisioningRequestConfig and the AdmissionCheck that make Kueue ask the
    cluster autoscaler for nodes before it admits a gang on a flavor that can grow
    (the seeds' Kueue guide): an atomic scale-up of the nodes for GPU pods, so that a
    gang is admitted only once its nodes are on their way, never partly."""
    config = {
        "apiVersion": KUEUE_API,
        "kind": "ProvisioningRequestConfig",
        "metadata": {"name": CAPACITY_CHECK, "labels": _labels()},
        "spec": {"provisioningClassName": ATOMIC_SCALE_UP, "managedResources": [GPU]},
    }
    check = {
        "apiVersion": KUEUE_API,
        "kind": "AdmissionCheck",
        "metadata": {"name": CAPACITY_CHECK, "labels": _labels()},
        "spec": {
            "controllerName": PROVISIONING_CONTROLLER,
            "parameters": {
                "apiGroup": "kueue.x-k8s.io",
                "kind": "ProvisioningRequestConfig",
                "name": CAPACITY_CHECK,
            },
        },
    }
    return [config, check]


def cluster_queue(
    tenant: Any,
    flavors: Iterable[Any],
    quotas: Iterable[Any],
    *,
    dispatch_check: str = "",
    capacity: Mapping[str, int] | None = None,
    usage_fair_sharing: bool = False,
) -> Manifest:
    """A tenant's ClusterQueue: one resource group over CPU, memory and GPUs (each DRA
    device class a resource of its own: :func:`device_resource`).

    Every catalogue flavor is listed (nominal 0 where the tenant has no quota row, so it
    may still borrow nothing: ``borrowingLimit`` 0), then the head flavor, whose CPU and
    memory allow one head per cluster the tenant may hold. Preemption reclaims nominal
    quota lent to the cohort and lets prod preempt dev inside the tenant; borrowing never
    preempts. The fair-sharing weight is the tenant's.

    MultiKueue: on the manager (``dispatch_check``, the tenant's MultiKueue check) the
    queue holds the fleet-wide quota and runs that check on every flavor. On a worker
    (``capacity``: its GPUs per flavor) the queue has no GPUs of its own: it borrows from
    the worker's Cohort (:func:`worker_cohort`, what the worker has), at most the tenant's
    quota, borrowing included, so that the tenants together never pass what the worker has
    and a worker without room does not admit. Quota and reclaim are the manager's; a
    worker never preempts across tenants.
    """
    by_key = _quota_map(quotas)
    entries = []
    total_gpus = 0
    flavors = list(flavors)
    covered = gpu_resources(flavors)
    for flavor in sorted(flavors, key=lambda f: str(f.name)):
        quota = by_key.get((int(tenant.pk), int(flavor.pk)))
        gpus = int(quota.gpus) if quota else 0
        borrow = int(quota.borrow_limit) if quota else 0
        lend = quota.lend_limit if quota else None
        total_gpus += gpus + borrow
        if capacity is not None:
            gpus, borrow, lend = 0, min(gpus + borrow, capacity.get(str(flavor.name), 0)), None
        entries.append(
            _flavor_entry(shapes.flavor_spec(flavor), gpus, borrow, lend, covered=covered)
        )
    heads = default_max_clusters(total_gpus)
    entries.append(
        {
            "name": HEAD_FLAVOR,
            "resources": [
                {"name": "cpu", "nominalQuota": q.cpu(shapes.HEAD_CPU * heads)},
                {"name": "memory", "nominalQuota": q.memory_gib(shapes.HEAD_MEMORY_GIB * heads)},
                *({"name": name, "nominalQuota": "0"} for name in covered),
            ],
        }
    )
    return {
        "apiVersion": KUEUE_API,
        "kind": "ClusterQueue",
        "metadata": {"name": cluster_queue_name(tenant), "labels": lbl.tenant_labels(tenant)},
        "spec": {
            "cohortName": WORKER_COHORT if capacity is not None else str(tenant.cohort),
            "namespaceSelector": {
                "matchLabels": {"kubernetes.io/metadata.name": str(tenant.namespace)}
            },
            "queueingStrategy": "BestEffortFIFO",
            "resourceGroups": [
                {"coveredResources": ["cpu", "memory", *covered], "flavors": entries}
            ],
            # A request that accepts several flavors (its workers' node affinity) takes
            # the first that fits, borrowing included, and only if none fits does it
            # preempt (reclaim) on one: the built-in pass's rule (decide's fungibility).
            "flavorFungibility": {
                "whenCanBorrow": "MayStopSearch",
                "whenCanPreempt": "TryNextFlavor",
            },
            "preemption": {
                "reclaimWithinCohort": "Never" if capacity is not None else "Any",
                "borrowWithinCohort": {"policy": "Never"},
                "withinClusterQueue": "LowerPriority",
            },
            "fairSharing": {"weight": q.number(tenant.weight)},
            # Usage-decayed fair share on: Kueue orders this queue's LocalQueues by their
            # decayed usage (with ``admissionFairSharing`` in its Configuration).
            **(
                {"admissionScope": {"admissionMode": "UsageBasedAdmissionFairSharing"}}
                if usage_fair_sharing
                else {}
            ),
            **(
                {"admissionChecksStrategy": {"admissionChecks": [{"name": dispatch_check}]}}
                if dispatch_check
                else _capacity_strategy(flavors)
            ),
        },
    }


def _capacity_strategy(flavors: Iterable[Any]) -> Manifest:
    """The ClusterQueue's admission-check strategy: the capacity check, on the flavors
    that can grow only (none can: no strategy)."""
    names = growable(flavors)
    if not names:
        return {}
    return {
        "admissionChecksStrategy": {
            "admissionChecks": [{"name": CAPACITY_CHECK, "onFlavors": names}]
        }
    }


def local_queue(tenant: Any) -> Manifest:
    """The LocalQueue in a tenant's namespace, pointing at its ClusterQueue."""
    return {
        "apiVersion": KUEUE_API,
        "kind": "LocalQueue",
        "metadata": {
            "name": LOCAL_QUEUE_NAME,
            "namespace": str(tenant.namespace),
            "labels": lbl.tenant_labels(tenant),
        },
        "spec": {"clusterQueue": cluster_queue_name(tenant)},
    }


def cohort(name: str, parent: str) -> Manifest:
    """A Cohort that places cohort ``name`` under ``parent`` in the cohort tree: the
    ClusterQueues of every cohort under one root borrow each other's unused quota (and
    reclaim it). A cohort without a parent needs no object: Kueue makes it implicitly
    from the ClusterQueues' ``cohortName``, as a root."""
    return {
        "apiVersion": KUEUE_API,
        "kind": "Cohort",
        "metadata": {"name": name, "labels": _labels()},
        "spec": {"parentName": parent},
    }


def worker_cohort(flavors: Iterable[Any], capacity: Mapping[str, int]) -> Manifest:
    """A MultiKueue worker's Cohort: the GPUs it has per flavor (with the CPU and memory
    that come with them), lent to the tenants' ClusterQueues there, which have none of
    their own (Kueue's hierarchical cohorts: a Cohort's ``resourceGroups`` quota)."""
    flavors = sorted(flavors, key=lambda f: str(f.name))
    covered = gpu_resources(flavors)
    entries = [
        _flavor_entry(
            shapes.flavor_spec(flavor), capacity.get(str(flavor.name), 0), 0, covered=covered
        )
        for flavor in flavors
    ]
    for entry in entries:  # a Cohort's quotas have no borrowing limit
        for resource in entry["resources"]:
            resource.pop("borrowingLimit", None)
    return {
        "apiVersion": KUEUE_API,
        "kind": "Cohort",
        "metadata": {"name": WORKER_COHORT, "labels": _labels()},
        "spec": {
            "resourceGroups": [
                {"coveredResources": ["cpu", "memory", *covered], "flavors": entries}
            ]
        }
        if entries
        else {},
    }


def kueue_objects(
    tenants: Iterable[Any],
    flavors: Iterable[Any],
    quotas: Iterable[Any],
    cohort_parents: Mapping[str, str] | None = None,
    *,
    dispatch: Mapping[int, str] | None = None,
    capacity: Mapping[str, int] | None = None,
    usage_fair_sharing: bool = False,
    platform_classes: Iterable[Any] = (),
) -> list[Manifest]:
    """Every cluster-wide Kueue object of Kueue mode, in apply order.

    ``quotas`` are Quota rows (only ``tenant_id``, ``flavor_id``, ``gpus`` and
    ``borrow_limit`` are read, so no relation is loaded); ``cohort_parents`` the cohort
    tree (a Cohort per cohort with a parent). MultiKueue: ``dispatch`` on the manager
    (tenant id to its MultiKueue check; the workers ask for nodes, not the manager),
    ``capacity`` on a worker (see :func:`cluster_queue`). ``platform_classes``: the
    PriorityClass rows (their WorkloadPriorityClasses).
    """
    tenant_list = sorted(tenants, key=lambda t: str(t.slug))
    flavor_list = sorted(flavors, key=lambda f: str(f.name))
    quota_list = list(quotas)
    objects: list[Manifest] = [*priority_classes(platform_classes)]
    # Topologies before the ResourceFlavors that name them (docs/topology.md).
    objects += topology_queues.kueue_topologies(flavor_list)
    objects += [
        topology_queues.with_topology(resource_flavor(flavor), flavor) for flavor in flavor_list
    ]
    objects.append(head_flavor())
    if growable(flavor_list) and dispatch is None:
        objects += capacity_check_objects()
    objects += [cohort(name, parent) for name, parent in sorted((cohort_parents or {}).items())]
    if capacity is not None:
        objects.append(worker_cohort(flavor_list, capacity))
    objects += [
        cluster_queue(
            tenant,
            flavor_list,
            quota_list,
            dispatch_check=(dispatch or {}).get(int(tenant.pk), ""),
            capacity=capacity,
            usage_fair_sharing=usage_fair_sharing,
        )
        for tenant in tenant_list
    ]
    # The LocalQueues live in the tenants' namespaces, so in their bundles
    # (clusters/kube/bundles.py), which a namespace built again gets back whole.
    return objects


def dra_device_class(quota: Any) -> str:
    """The DeviceClass a quota row's flavor claims from ("" for the extended resource)."""
    return str(getattr(getattr(quota, "flavor", None), "dra_device_class", "") or "")


def kai_queue(tenant: Any, quotas: Iterable[Any], *, parent_queue: str | None = None) -> Manifest:
    """A tenant's KAI ``Queue`` for fractional GPU sharing.

    KAI wants ``quota``, ``overQuotaWeight`` and ``limit`` for every resource; its units
    are GPUs, millicores and megabytes, and ``-1`` is unlimited. GPUs: nominal quota,
    limited to nominal plus borrowing; CPU and memory mirror the tenant's totals (none
    set: quota 0, unlimited). The over-quota weight is the fair-sharing weight.
    """
    # Only the extended resource's GPUs: KAI never schedules a DRA flavor's workers (a DRA
    # flavor cannot share), so its quota is no room in this queue.
    quota_list = [
        quota
        for quota in quotas
        if int(quota.tenant_id) == int(tenant.pk) and not dra_device_class(quota)
    ]
    gpus = sum(int(quota.gpus) for quota in quota_list)
    limit = gpus + sum(int(quota.borrow_limit) for quota in quota_list)
    weight = float(tenant.weight)
    cpu_millis = int(tenant.cpu_quota) * 1000
    memory_mb = int(Decimal(tenant.memory_quota_gib) * Decimal("1073.741824"))

    def res(quota: int, cap: int) -> Manifest:
        return {"quota": quota, "overQuotaWeight": weight, "limit": cap}

    spec: Manifest = {
        "displayName": str(tenant.name),
        "resources": {
            "gpu": res(gpus, limit),
            "cpu": res(cpu_millis, cpu_millis or KAI_UNLIMITED),
            "memory": res(memory_mb, memory_mb or KAI_UNLIMITED),
        },
    }
    if parent_queue:
        spec["parentQueue"] = parent_queue
    return {
        "apiVersion": KAI_API,
        "kind": "Queue",
        "metadata": {"name": kai_queue_name(tenant), "labels": lbl.tenant_labels(tenant)},
        "spec": spec,
    }
