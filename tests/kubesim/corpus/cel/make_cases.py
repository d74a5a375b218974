"""Writes the CEL corpus: for every ``x-kubernetes-validations`` rule of the CRDs kubesim
serves, an object that breaks it and its valid twin, as kubectl would be given them.

Run from the repository root (``python tests/kubesim/corpus/cel/make_cases.py``); it rewrites
``cases.yaml`` and one folder per case. ``create`` cases are two manifests (``kubectl
create -f``); ``update`` cases add the object first (``base.yaml``, ``kubectl apply -f``) and
apply each twin on it; ``status`` cases patch the status (``kubectl patch
--subresource=status --type=merge``) of the base object. ``base-status.yaml``, where given,
is a status patch applied after the base.
"""

from __future__ import annotations

import copy
import shutil
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).parent
KQ = "kueue.x-k8s.io"
T0 = "2026-01-01T00:00:00Z"

CASES: list[dict[str, Any]] = []


def obj(kind: str, api: str, name: str, spec: dict[str, Any], ns: bool = False) -> dict[str, Any]:
    """A manifest."""
    meta: dict[str, Any] = {"name": name}
    if ns:
        meta["namespace"] = "default"
    return {"apiVersion": api, "kind": kind, "metadata": meta, "spec": spec}


def case(
    cid: str,
    kind: str,
    version: str,
    field: str,
    message: str,
    mode: str,
    invalid: dict[str, Any],
    valid: dict[str, Any],
    base: dict[str, Any] | None = None,
    base_status: dict[str, Any] | None = None,
) -> None:
    """Record one case; ``field`` and ``message`` are what the refusal must name."""
    CASES.append(
        {
            "id": cid,
            "kind": kind,
            "version": version,
            "field": field,
            "message": message,
            "mode": mode,
            "files": {"invalid": invalid, "valid": valid, "base": base, "base-status": base_status},
        }
    )


def with_spec(manifest: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """A copy of ``manifest`` with spec keys set (None: removed)."""
    out = copy.deepcopy(manifest)
    for key, value in changes.items():
        if value is None:
            out["spec"].pop(key, None)
        else:
            out["spec"][key] = value
    return out


# ---- ProvisioningRequest (autoscaling.x-k8s.io): immutable spec fields --------------------
for v in ("v1", "v1beta1"):
    api = f"autoscaling.x-k8s.io/{v}"
    base = obj(
        "ProvisioningRequest",
        api,
        f"pr-{v}",
        {
            "provisioningClassName": "check-capacity.autoscaling.x-k8s.io",
            "parameters": {"a": "1"},
            "podSets": [{"podTemplateRef": {"name": "tpl"}, "count": 1}],
        },
        ns=True,
    )
    for slug, key, bad in (
        ("params", "parameters", {"a": "2"}),
        ("podsets", "podSets", [{"podTemplateRef": {"name": "tpl"}, "count": 2}]),
        ("class", "provisioningClassName", "queued-provisioning.gke.io"),
    ):
        b = copy.deepcopy(base)
        b["metadata"]["name"] = f"pr-{v}-{slug}"
        valid = copy.deepcopy(b)
        valid["metadata"]["labels"] = {"touched": "yes"}  # an allowed change beside
        case(
            f"provisioningrequest-{v}-{slug}",
            "ProvisioningRequest",
            v,
            f"spec.{key}",
            "Value is immutable",
            "update",
            with_spec(b, **{key: bad}),
            valid,
            base=b,
        )

# ---- AdmissionCheck: controllerName immutable ----------------------------------------------
for v in ("v1beta1", "v1beta2"):
    b = obj("AdmissionCheck", f"{KQ}/{v}", f"ac-{v}", {"controllerName": "example.com/a"})
    case(
        f"admissioncheck-{v}-controller",
        "AdmissionCheck",
        v,
        "spec.controllerName",
        "field is immutable",
        "update",
        with_spec(b, controllerName="example.com/b"),
        with_spec(b, parameters={"apiGroup": KQ, "kind": "ProvisioningRequestConfig", "name": "p"}),
        base=b,
    )


# ---- ClusterQueue and Cohort ---------------------------------------------------------------
def groups(borrowing: bool = False, resources: int = 2) -> list[dict[str, Any]]:
    """Resource groups covering cpu and memory; ``resources``: how many the flavor names."""
    res = [{"name": "cpu", "nominalQuota": "4"}, {"name": "memory", "nominalQuota": "8Gi"}]
    if borrowing:
        res[0]["borrowingLimit"] = "2"
    return [
        {
            "coveredResources": ["cpu", "memory"],
            "flavors": [{"name": "f", "resources": res[:resources]}],
        }
    ]


for v, cohort_key in (("v1beta1", "cohort"), ("v1beta2", "cohortName")):
    api = f"{KQ}/{v}"
    name = f"cq-{v}"
    case(
        f"clusterqueue-{v}-borrowing-without-cohort",
        "ClusterQueue",
        v,
        "spec",
        "borrowingLimit must be nil when cohort is empty",
        "create",
        obj("ClusterQueue", api, f"{name}-borrow", {"resourceGroups": groups(borrowing=True)}),
        obj(
            "ClusterQueue",
            api,
            f"{name}-borrow",
            {cohort_key: "pool", "resourceGroups": groups(borrowing=True)},
        ),
    )
    case(
        f"clusterqueue-{v}-fungibility-preference",
        "ClusterQueue",
        v,
        "spec.flavorFungibility",
        "preference can only be set when both whenCanBorrow and whenCanPreempt are TryNextFlavor",
        "create",
        obj(
            "ClusterQueue",
            api,
            f"{name}-fungibility",
            {
                "flavorFungibility": {
                    "whenCanBorrow": "MayStopSearch",
                    "whenCanPreempt": "TryNextFlavor",
                    "preference": "BorrowingOverPreemption",
                }
            },
        ),
        obj(
            "ClusterQueue",
            api,
            f"{name}-fungibility",
            {
                "flavorFungibility": {
                    "whenCanBorrow": "TryNextFlavor",
                    "whenCanPreempt": "TryNextFlavor",
                    "preference": "BorrowingOverPreemption",
                }
            },
        ),
    )
    case(
        f"clusterqueue-{v}-reclaim-never-borrow",
        "ClusterQueue",
        v,
        "spec.preemption",
        "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never",
        "create",
        obj(
            "ClusterQueue",
            api,
            f"{name}-preemption",
            {
                "preemption": {
                    "reclaimWithinCohort": "Never",
                    "borrowWithinCohort": {"policy": "LowerPriority"},
                }
            },
        ),
        obj(
            "ClusterQueue",
            api,
            f"{name}-preemption",
            {
                "preemption": {
                    "reclaimWithinCohort": "Any",
                    "borrowWithinCohort": {"policy": "LowerPriority"},
                }
            },
        ),
    )
    for kind, abbr in (("ClusterQueue", "clusterqueue"), ("Cohort", "cohort")):
        case(
            f"{abbr}-{v}-covered-resources",
            kind,
            v,
            "spec.resourceGroups[0]",
            "flavors must have the same number of resources as the coveredResources",
            "create",
            obj(kind, api, f"{abbr}-{v}-covered", {"resourceGroups": groups(resources=1)}),
            obj(kind, api, f"{abbr}-{v}-covered", {"resourceGroups": groups()}),
        )

# ---- LocalQueue: clusterQueue immutable ------------------------------------------------------
for v in ("v1beta1", "v1beta2"):
    b = obj("LocalQueue", f"{KQ}/{v}", f"lq-{v}", {"clusterQueue": "team-a"}, ns=True)
    case(
        f"localqueue-{v}-clusterqueue",
        "LocalQueue",
        v,
        "spec.clusterQueue",
        "field is immutable",
        "update",
        with_spec(b, clusterQueue="team-b"),
        with_spec(b, stopPolicy="Hold"),
        base=b,
    )

# ---- ResourceFlavor --------------------------------------------------------------------------
TOL_RULES = (
    (
        "toleration-key",
        "operator must be Exists when 'key' is empty, which means 'match all values and all keys'",
        {"operator": "Equal", "value": "x", "effect": "NoSchedule"},
        {"operator": "Exists", "effect": "NoSchedule"},
    ),
    (
        "toleration-seconds",
        "effect must be 'NoExecute' when 'tolerationSeconds' is set",
        {"key": "k", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 30},
        {"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30},
    ),
    (
        "toleration-operator",
        "supported toleration values: 'Equal'(default), 'Exists'",
        {"key": "k", "operator": "In", "value": "x"},
        {"key": "k", "operator": "Equal", "value": "x"},
    ),
    (
        "toleration-exists-value",
        "a value must be empty when 'operator' is 'Exists'",
        {"key": "k", "operator": "Exists", "value": "x"},
        {"key": "k", "operator": "Exists"},
    ),
    (
        "toleration-effect",
        "supported taint effect values: 'NoSchedule', 'PreferNoSchedule', 'NoExecute'",
        {"key": "k", "operator": "Equal", "value": "x", "effect": "Sometimes"},
        {"key": "k", "operator": "Equal", "value": "x", "effect": "NoSchedule"},
    ),
)

for v in ("v1beta1", "v1beta2"):
    api = f"{KQ}/{v}"
    p = f"rf-{v}"
    case(
        f"resourceflavor-{v}-topology-needs-labels",
        "ResourceFlavor",
        v,
        "spec",
        "at least one nodeLabel is required when topology is set",
        "create",
        obj("ResourceFlavor", api, f"{p}-topo", {"topologyName": "default"}),
        obj(
            "ResourceFlavor",
            api,
            f"{p}-topo",
            {"topologyName": "default", "nodeLabels": {"pool": "h100"}},
        ),
    )
    topo = obj(
        "ResourceFlavor",
        api,
        f"{p}-topo-fixed",
        {
            "topologyName": "default",
            "nodeLabels": {"pool": "h100"},
            "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
        },
    )
    for slug, message, bad in (
        (
            "labels-immutable",
            "nodeLabels are immutable when topologyName is set",
            {"nodeLabels": {"pool": "a100"}},
        ),
        (
            "tolerations-immutable",
            "tolerations are immutable when topologyName is set",
            {"tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoExecute"}]},
        ),
        (
            "topology-immutable",
            "topologyName is immutable when topologyName is set",
            {"topologyName": "other"},
        ),
    ):
        b = copy.deepcopy(topo)
        b["metadata"]["name"] = f"{p}-{slug}"
        good = copy.deepcopy(b)
        good["metadata"]["labels"] = {"touched": "yes"}
        good["spec"]["nodeTaints"] = [{"key": "gpu", "value": "yes", "effect": "NoSchedule"}]
        case(
            f"resourceflavor-{v}-{slug}",
            "ResourceFlavor",
            v,
            "spec",
            message,
            "update",
            with_spec(b, **bad),
            good,
            base=b,
        )
    case(
        f"resourceflavor-{v}-taint-effect",
        "ResourceFlavor",
        v,
        "spec.nodeTaints",
        "supported taint effect values: 'NoSchedule', 'PreferNoSchedule', 'NoExecute'",
        "create",
        obj(
            "ResourceFlavor",
            api,
            f"{p}-taint",
            {"nodeTaints": [{"key": "spot", "value": "true", "effect": "Sometimes"}]},
        ),
        obj(
            "ResourceFlavor",
            api,
            f"{p}-taint",
            {"nodeTaints": [{"key": "spot", "value": "true", "effect": "NoSchedule"}]},
        ),
    )
    for slug, message, bad, good in TOL_RULES:
        case(
            f"resourceflavor-{v}-{slug}",
            "ResourceFlavor",
            v,
            "spec.tolerations",
            message,
            "create",
            obj("ResourceFlavor", api, f"{p}-{slug}", {"tolerations": [bad]}),
            obj("ResourceFlavor", api, f"{p}-{slug}", {"tolerations": [good]}),
        )


# ---- Workload --------------------------------------------------------------------------------
def podset(name: str = "main", count: int = 2, **extra: Any) -> dict[str, Any]:
    """A pod set of ``count`` pods."""
    return {
        "name": name,
        "count": count,
        "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}},
        **extra,
    }


def workload(v: str, name: str, **spec: Any) -> dict[str, Any]:
    """A Workload with one pod set (plus ``spec`` keys)."""
    return obj(
        "Workload",
        f"{KQ}/{v}",
        name,
        {"queueName": "user-queue", "podSets": [podset()], **spec},
        ns=True,
    )


def condition(kind: str, status: str = "True") -> dict[str, Any]:
    """A status condition."""
    return {
        "type": kind,
        "status": status,
        "reason": "Test",
        "message": "",
        "lastTransitionTime": T0,
    }


def admission(*names: str, **assignment: Any) -> dict[str, Any]:
    """``status.admission`` assigning each named pod set."""
    return {
        "clusterQueue": "cluster-queue",
        "podSetAssignments": [
            {
                "name": n,
                "flavors": {"cpu": "default"},
                "resourceUsage": {"cpu": "1"},
                "count": 2,
                **assignment,
            }
            for n in names
        ],
    }


RESERVED = {"status": {"conditions": [condition("QuotaReserved")], "admission": admission("main")}}
ADMITTED = {
    "status": {
        "conditions": [condition("QuotaReserved"), condition("Admitted")],
        "admission": admission("main"),
    }
}

for v in ("v1beta1", "v1beta2"):
    w = f"wl-{v}"
    # The root rule on the admission: checked on every write, so a status patch breaks it.
    case(
        f"workload-{v}-assignments-count",
        "Workload",
        v,
        "<nil>",
        "podSetAssignments must have the same number of podSets as the spec",
        "status",
        {
            "status": {
                "conditions": [condition("QuotaReserved")],
                "admission": admission("main", "extra"),
            }
        },
        {"status": {"conditions": [condition("QuotaReserved")], "admission": admission("main")}},
        base=workload(v, f"{w}-assignments"),
    )
    b = workload(v, f"{w}-queue")
    case(
        f"workload-{v}-queue-immutable",
        "Workload",
        v,
        "<nil>",
        "queueName is immutable while workload quota reserved",
        "update",
        with_spec(b, queueName="other-queue"),
        with_spec(b, active=False),
        base=b,
        base_status=RESERVED,
    )
    b = workload(v, f"{w}-maxexec", maximumExecutionTimeSeconds=60)
    case(
        f"workload-{v}-maxexec-immutable",
        "Workload",
        v,
        "<nil>",
        "maximumExecutionTimeSeconds is immutable while workload quota reserved",
        "update",
        with_spec(b, maximumExecutionTimeSeconds=120),
        with_spec(b, active=False),
        base=b,
        base_status=ADMITTED,
    )
    prio_key = "priorityClassName" if v == "v1beta1" else "priorityClassRef"
    prio_value: Any = (
        "high" if v == "v1beta1" else {"group": KQ, "kind": "WorkloadPriorityClass", "name": "high"}
    )
    case(
        f"workload-{v}-priority-required",
        "Workload",
        v,
        "spec",
        f"priority should not be nil when {prio_key} is set",
        "create",
        workload(v, f"{w}-priority", **{prio_key: prio_value}),
        workload(v, f"{w}-priority", **{prio_key: prio_value, "priority": 100}),
    )
    case(
        f"workload-{v}-mincount",
        "Workload",
        v,
        "spec.podSets[0]",
        "minCount should be positive and less or equal to count",
        "create",
        workload(v, f"{w}-mincount", podSets=[podset(minCount=3)]),
        workload(v, f"{w}-mincount", podSets=[podset(minCount=1)]),
    )
    case(
        f"workload-{v}-cluster-name-immutable",
        "Workload",
        v,
        "status",
        "clusterName is immutable once set",
        "status",
        {"status": {"clusterName": "worker-2"}},
        {"status": {"clusterName": None}},
        base=workload(v, f"{w}-cluster"),
        base_status={"status": {"clusterName": "worker-1"}},
    )
    case(
        f"workload-{v}-cluster-name-exclusive",
        "Workload",
        v,
        "status",
        "clusterName and nominatedClusterNames are mutually exclusive",
        "status",
        {"status": {"clusterName": "worker-1", "nominatedClusterNames": ["worker-2"]}},
        {"status": {"nominatedClusterNames": ["worker-1", "worker-2"]}},
        base=workload(v, f"{w}-nominated"),
    )
    for slug, message, bad, good in TOL_RULES:
        check = {
            "name": "prov",
            "state": "Ready",
            "message": "",
            "lastTransitionTime": T0,
        }
        case(
            f"workload-{v}-check-{slug}",
            "Workload",
            v,
            "status.admissionChecks[0].podSetUpdates[0].tolerations",
            message,
            "status",
            {
                "status": {
                    "admissionChecks": [
                        {**check, "podSetUpdates": [{"name": "main", "tolerations": [bad]}]}
                    ]
                }
            },
            {
                "status": {
                    "admissionChecks": [
                        {**check, "podSetUpdates": [{"name": "main", "tolerations": [good]}]}
                    ]
                }
            },
            base=workload(v, f"{w}-{slug}"),
        )

# v1beta1 only: priorityClassSource / priorityClassName while quota is reserved.
b = workload(
    "v1beta1",
    "wl-v1beta1-prio-source",
    priorityClassSource="scheduling.k8s.io/priorityclass",
    priorityClassName="high",
    priority=100,
)
case(
    "workload-v1beta1-priority-source-immutable",
    "Workload",
    "v1beta1",
    "<nil>",
    "priorityClassSource is immutable while workload quota reserved",
    "update",
    with_spec(b, priorityClassSource="kueue.x-k8s.io/workloadpriorityclass"),
    with_spec(b, active=False),
    base=b,
    base_status=RESERVED,
)
b = workload(
    "v1beta1",
    "wl-v1beta1-prio-name",
    priorityClassSource="scheduling.k8s.io/priorityclass",
    priorityClassName="high",
    priority=100,
)
case(
    "workload-v1beta1-priority-name-immutable",
    "Workload",
    "v1beta1",
    "<nil>",
    "priorityClassName is immutable while workload quota reserved and priorityClassSource is not "
    "equal to kueue.x-k8s.io/workloadpriorityclass",
    "update",
    with_spec(b, priorityClassName="low"),
    with_spec(b, active=False),
    base=b,
    base_status=RESERVED,
)

# v1beta2 only: priorityClassRef and the topology assignment.
WPC = {"group": KQ, "kind": "WorkloadPriorityClass", "name": "high"}
PC = {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": "high"}
b = workload("v1beta2", "wl-v1beta2-ref", priorityClassRef=WPC, priority=100)
case(
    "workload-v1beta2-priority-ref-kept",
    "Workload",
    "v1beta2",
    "<nil>",
    "priorityClassRef is immutable while workload quota reserved",
    "update",
    with_spec(b, priorityClassRef=None),
    with_spec(b, active=False),
    base=b,
    base_status=RESERVED,
)
b = workload("v1beta2", "wl-v1beta2-ref-group", priorityClassRef=WPC, priority=100)
case(
    "workload-v1beta2-priority-ref-group",
    "Workload",
    "v1beta2",
    "<nil>",
    "priorityClassRef.group is immutable while workload quota reserved",
    "update",
    with_spec(b, priorityClassRef=PC),
    with_spec(b, priorityClassRef={**WPC, "name": "low"}),
    base=b,
    base_status=RESERVED,
)
b = workload("v1beta2", "wl-v1beta2-ref-kind", priorityClassRef=WPC, priority=100)
case(
    "workload-v1beta2-priority-ref-kind",
    "Workload",
    "v1beta2",
    "<nil>",
    "priorityClassRef.kind is immutable while workload quota reserved",
    "update",
    # PriorityClass is allowed for kueue.x-k8s.io by the enum, refused by the kind rule too.
    with_spec(b, priorityClassRef={**WPC, "kind": "PriorityClass"}),
    with_spec(b, priorityClassRef={**WPC, "name": "low"}),
    base=b,
    base_status=RESERVED,
)
b = workload("v1beta2", "wl-v1beta2-ref-name", priorityClassRef=PC, priority=100)
case(
    "workload-v1beta2-priority-ref-name",
    "Workload",
    "v1beta2",
    "<nil>",
    "priorityClassRef.name is immutable for scheduling.k8s.io/priorityclass while workload quota "
    "reserved",
    "update",
    with_spec(b, priorityClassRef={**PC, "name": "low"}),
    with_spec(b, active=False),
    base=b,
    base_status=RESERVED,
)
case(
    "workload-v1beta2-ref-priorityclass-kind",
    "Workload",
    "v1beta2",
    "spec.priorityClassRef",
    "only the PriorityClass kind is allowed for the scheduling.k8s.io group",
    "create",
    workload(
        "v1beta2",
        "wl-v1beta2-pc-kind",
        priorityClassRef={**PC, "kind": "WorkloadPriorityClass"},
        priority=1,
    ),
    workload("v1beta2", "wl-v1beta2-pc-kind", priorityClassRef=PC, priority=1),
)
case(
    "workload-v1beta2-ref-workloadpriorityclass-kind",
    "Workload",
    "v1beta2",
    "spec.priorityClassRef",
    "only the WorkloadPriorityClass kind is allowed for the kueue.x-k8s.io group",
    "create",
    workload(
        "v1beta2",
        "wl-v1beta2-wpc-kind",
        priorityClassRef={**WPC, "kind": "PriorityClass"},
        priority=1,
    ),
    workload("v1beta2", "wl-v1beta2-wpc-kind", priorityClassRef=WPC, priority=1),
)


def topology(levels: int = 1, values: int = 1, domains: int = 1, **counts: Any) -> dict[str, Any]:
    """A topology assignment of one slice."""
    per_level: list[dict[str, Any]] = [{"universal": "block-1"}] * values
    return {
        "levels": [f"level-{i}" for i in range(levels)],
        "slices": [
            {
                "domainCount": domains,
                "podCounts": counts or {"universal": 2},
                "valuesPerLevel": per_level,
            }
        ],
    }


for slug, field, message, bad, good in (
    (
        "topology-levels",
        "status.admission.podSetAssignments[0].topologyAssignment",
        "valuesPerLevel must have the same length as the number of levels in this "
        "TopologyAssignment",
        topology(levels=2, values=1),
        topology(levels=2, values=2),
    ),
    (
        "topology-pod-counts",
        "status.admission.podSetAssignments[0].topologyAssignment.slices[0]",
        "podCounts.individual must have length equal to domainCount",
        topology(domains=2, values=1, individual=[1]),
        topology(domains=2, values=1, individual=[1, 1]),
    ),
    (
        "topology-roots",
        "status.admission.podSetAssignments[0].topologyAssignment.slices[0]",
        "valuesPerLevel.individual, if set, must have roots of length equal to domainCount of this "
        "TopologyAssignmentSlice",
        {
            **topology(domains=2),
            "slices": [
                {
                    "domainCount": 2,
                    "podCounts": {"universal": 1},
                    "valuesPerLevel": [{"individual": {"roots": ["a"]}}],
                }
            ],
        },
        {
            **topology(domains=2),
            "slices": [
                {
                    "domainCount": 2,
                    "podCounts": {"universal": 1},
                    "valuesPerLevel": [{"individual": {"roots": ["a", "b"]}}],
                }
            ],
        },
    ),
    (
        "topology-pod-counts-one-of",
        "status.admission.podSetAssignments[0].topologyAssignment.slices[0].podCounts",
        "exactly one of the fields in [universal individual] must be set",
        topology(universal=1, individual=[1]),
        topology(universal=1),
    ),
    (
        "topology-values-one-of",
        "status.admission.podSetAssignments[0].topologyAssignment.slices[0].valuesPerLevel[0]",
        "exactly one of the fields in [universal individual] must be set",
        {
            **topology(),
            "slices": [
                {
                    "domainCount": 1,
                    "podCounts": {"universal": 1},
                    "valuesPerLevel": [{"universal": "a", "individual": {"roots": ["a"]}}],
                }
            ],
        },
        {
            **topology(),
            "slices": [
                {
                    "domainCount": 1,
                    "podCounts": {"universal": 1},
                    "valuesPerLevel": [{"individual": {"roots": ["a"]}}],
                }
            ],
        },
    ),
):
    case(
        f"workload-v1beta2-{slug}",
        "Workload",
        "v1beta2",
        field,
        message,
        "status",
        {
            "status": {
                "conditions": [condition("QuotaReserved")],
                "admission": admission("main", topologyAssignment=bad),
            }
        },
        {
            "status": {
                "conditions": [condition("QuotaReserved")],
                "admission": admission("main", topologyAssignment=good),
            }
        },
        base=workload("v1beta2", f"wl-v1beta2-{slug}"),
    )

MANAGED_BY_VALUES = (
    "the managedBy field value must be either 'ray.io/kuberay-operator' or "
    "'kueue.x-k8s.io/multikueue'"
)

# ---- RayCluster and RayJob -------------------------------------------------------------------
HEAD = {
    "rayStartParams": {},
    "template": {"spec": {"containers": [{"name": "ray-head", "image": "rayproject/ray:2.46.0"}]}},
}
REDIS = {"backend": "redis", "redisAddress": "redis:6379"}


def raycluster_spec(**extra: Any) -> dict[str, Any]:
    """A RayCluster spec of a head only."""
    return {"rayVersion": "2.46.0", "headGroupSpec": copy.deepcopy(HEAD), **extra}


for kind, abbr, wrap in (
    ("RayCluster", "rc", lambda spec: spec),
    ("RayJob", "rj", lambda spec: {"entrypoint": "python -c 'print(1)'", "rayClusterSpec": spec}),
    ("RayService", "rs", lambda spec: {"rayClusterConfig": spec}),
):
    field_name = {"RayJob": "rayClusterSpec", "RayService": "rayClusterConfig"}.get(kind, "")
    prefix = f"spec.{field_name}" if field_name else "spec"
    b = obj(
        kind,
        "ray.io/v1",
        f"{abbr}-gcs-backend",
        wrap(raycluster_spec(gcsFaultToleranceOptions=REDIS)),
        ns=True,
    )
    good = copy.deepcopy(b)
    good["metadata"]["labels"] = {"touched": "yes"}
    bad = copy.deepcopy(b)
    (bad["spec"][field_name] if field_name else bad["spec"])["gcsFaultToleranceOptions"][
        "backend"
    ] = "rocksdb"
    case(
        f"{kind.lower()}-v1-{'' if kind == 'RayCluster' else 'cluster-'}gcs-backend-immutable",
        kind,
        "v1",
        f"{prefix}.gcsFaultToleranceOptions.backend",
        "gcsFaultToleranceOptions.backend is immutable",
        "update",
        bad,
        good,
        base=b,
    )
    b = obj(
        kind,
        "ray.io/v1",
        f"{abbr}-managed-by",
        wrap(raycluster_spec(managedBy="ray.io/kuberay-operator")),
        ns=True,
    )
    bad = copy.deepcopy(b)
    (bad["spec"][field_name] if field_name else bad["spec"])["managedBy"] = (
        "kueue.x-k8s.io/multikueue"
    )
    case(
        f"{kind.lower()}-v1-{'' if kind == 'RayCluster' else 'cluster-'}managed-by-immutable",
        kind,
        "v1",
        f"{prefix}.managedBy",
        "the managedBy field is immutable",
        "update",
        bad,
        {**b, "metadata": {**b["metadata"], "labels": {"touched": "yes"}}},
        base=b,
    )
    bad = obj(
        kind,
        "ray.io/v1",
        f"{abbr}-managed-by-value",
        wrap(raycluster_spec(managedBy="example.com/mine")),
        ns=True,
    )
    case(
        f"{kind.lower()}-v1-{'' if kind == 'RayCluster' else 'cluster-'}managed-by-value",
        kind,
        "v1",
        f"{prefix}.managedBy",
        MANAGED_BY_VALUES,
        "create",
        bad,
        obj(
            kind,
            "ray.io/v1",
            f"{abbr}-managed-by-value",
            wrap(raycluster_spec(managedBy="ray.io/kuberay-operator")),
            ns=True,
        ),
    )


def rayjob(name: str, **spec: Any) -> dict[str, Any]:
    """A RayJob with its own one-head cluster (plus ``spec`` keys)."""
    return obj(
        "RayJob",
        "ray.io/v1",
        name,
        {"entrypoint": "python -c 'print(1)'", "rayClusterSpec": raycluster_spec(), **spec},
        ns=True,
    )


def rayservice(name: str, **spec: Any) -> dict[str, Any]:
    """A RayService with a one-head cluster (plus ``spec`` keys)."""
    return obj(
        "RayService", "ray.io/v1", name, {"rayClusterConfig": raycluster_spec(), **spec}, ns=True
    )


for kind, make, abbr, touch in (
    ("RayJob", rayjob, "job", {"ttlSecondsAfterFinished": 60}),
    ("RayService", rayservice, "svc", {"rayClusterDeletionDelaySeconds": 30}),
):
    b = make(f"r{abbr[0]}-managed-by-{abbr}", managedBy="ray.io/kuberay-operator")
    case(
        f"{kind.lower()}-v1-managed-by-immutable",
        kind,
        "v1",
        "spec.managedBy",
        "the managedBy field is immutable",
        "update",
        with_spec(b, managedBy="kueue.x-k8s.io/multikueue"),
        with_spec(b, **touch),
        base=b,
    )
    case(
        f"{kind.lower()}-v1-managed-by-value",
        kind,
        "v1",
        "spec.managedBy",
        MANAGED_BY_VALUES,
        "create",
        make(f"r{abbr[0]}-managed-by-{abbr}-value", managedBy="example.com/mine"),
        make(f"r{abbr[0]}-managed-by-{abbr}-value", managedBy="kueue.x-k8s.io/multikueue"),
    )
DELETE = {"policy": "DeleteCluster"}
for slug, field, message, bad, good in (
    (
        "deletion-legacy-and-rules",
        "spec.deletionStrategy",
        "legacy policies (onSuccess/onFailure) and deletionRules cannot be used together "
        "within the same deletionStrategy",
        {
            "onSuccess": DELETE,
            "onFailure": DELETE,
            "deletionRules": [{"policy": "DeleteCluster", "condition": {"jobStatus": "SUCCEEDED"}}],
        },
        {"deletionRules": [{"policy": "DeleteCluster", "condition": {"jobStatus": "SUCCEEDED"}}]},
    ),
    (
        "deletion-both-legacy",
        "spec.deletionStrategy",
        "deletionStrategy requires either BOTH onSuccess and onFailure, OR the deletionRules field "
        "(cannot be empty)",
        {"onSuccess": DELETE},
        {"onSuccess": DELETE, "onFailure": DELETE},
    ),
    (
        "deletion-condition-both",
        "spec.deletionStrategy.deletionRules[0].condition",
        "JobStatus and JobDeploymentStatus cannot be used together within the same deletion "
        "condition.",
        {
            "deletionRules": [
                {
                    "policy": "DeleteCluster",
                    "condition": {"jobStatus": "FAILED", "jobDeploymentStatus": "Failed"},
                }
            ]
        },
        {
            "deletionRules": [
                {"policy": "DeleteCluster", "condition": {"jobDeploymentStatus": "Failed"}}
            ]
        },
    ),
    (
        "deletion-condition-none",
        "spec.deletionStrategy.deletionRules[0].condition",
        "the deletion condition requires either the JobStatus or the JobDeploymentStatus field.",
        {"deletionRules": [{"policy": "DeleteCluster", "condition": {"ttlSeconds": 10}}]},
        {
            "deletionRules": [
                {"policy": "DeleteCluster", "condition": {"ttlSeconds": 10, "jobStatus": "FAILED"}}
            ]
        },
    ),
):
    case(
        f"rayjob-v1-{slug}",
        "RayJob",
        "v1",
        field,
        message,
        "create",
        rayjob(f"rj-{slug}", deletionStrategy=bad),
        rayjob(f"rj-{slug}", deletionStrategy=good),
    )


# ---- MultiKueue ----------------------------------------------------------------------------
_SECRET = {"locationType": "Secret", "location": "worker1-secret"}
case(
    "multikueuecluster-v1beta2-one-source",
    "MultiKueueCluster",
    "v1beta2",
    "spec.clusterSource",
    "exactly one of the fields in [kubeConfig clusterProfileRef] must be set",
    "create",
    obj(
        "MultiKueueCluster",
        f"{KQ}/v1beta2",
        "mkc-two-sources",
        {"clusterSource": {"kubeConfig": _SECRET, "clusterProfileRef": {"name": "w1"}}},
    ),
    obj(
        "MultiKueueCluster",
        f"{KQ}/v1beta2",
        "mkc-two-sources",
        {"clusterSource": {"kubeConfig": _SECRET}},
    ),
)
case(
    "multikueueconfig-v1beta2-unique-clusters",
    "MultiKueueConfig",
    "v1beta2",
    "spec.clusters",
    "must be unique",
    "create",
    obj("MultiKueueConfig", f"{KQ}/v1beta2", "mkconf-twice", {"clusters": ["w1", "w1"]}),
    obj("MultiKueueConfig", f"{KQ}/v1beta2", "mkconf-twice", {"clusters": ["w1", "w2"]}),
)


# ---- Topology (Kueue's, and KAI's) ---------------------------------------------------------
BLOCK = "network.topology.kubernetes.io/block"
RACK = "network.topology.kubernetes.io/rack"
HOST = "kubernetes.io/hostname"


def levels(*labels: str, alias: str = "") -> list[dict[str, str]]:
    """A topology's ``levels`` (an ``alias`` on the last one, as KAI allows)."""
    out = [{"nodeLabel": label} for label in labels]
    if alias:
        out[-1]["alias"] = alias
    return out


for v in ("v1beta1", "v1beta2"):
    api = f"{KQ}/{v}"
    b = obj("Topology", api, f"topo-{v}", {"levels": levels(BLOCK, RACK)})
    case(
        f"topology-{v}-levels-immutable",
        "Topology",
        v,
        "spec.levels",
        "field is immutable",
        "update",
        with_spec(b, levels=levels(BLOCK)),
        with_spec(b, levels=levels(BLOCK, RACK)),
        base=b,
    )
    case(
        f"topology-{v}-unique-levels",
        "Topology",
        v,
        "spec.levels",
        "must be unique",
        "create",
        obj("Topology", api, f"topo-twice-{v}", {"levels": levels(RACK, RACK)}),
        obj("Topology", api, f"topo-twice-{v}", {"levels": levels(BLOCK, RACK)}),
    )
    case(
        f"topology-{v}-hostname-lowest",
        "Topology",
        v,
        "spec.levels",
        "the kubernetes.io/hostname label can only be used at the lowest level of topology",
        "create",
        obj("Topology", api, f"topo-host-{v}", {"levels": levels(HOST, RACK)}),
        obj("Topology", api, f"topo-host-{v}", {"levels": levels(RACK, HOST)}),
    )

KAI = "kai.scheduler/v1alpha1"
kai_base = obj("Topology", KAI, "kai-topo", {"levels": levels(BLOCK, RACK)})
case(
    "kai-topology-v1alpha1-labels-immutable",
    "Topology",
    "v1alpha1",
    "spec.levels",
    "nodeLabel structure is immutable; only aliases may be edited",
    "update",
    with_spec(kai_base, levels=levels(BLOCK, HOST)),
    with_spec(kai_base, levels=levels(BLOCK, RACK, alias="rack")),
    base=kai_base,
)
case(
    "kai-topology-v1alpha1-unique-labels",
    "Topology",
    "v1alpha1",
    "spec.levels",
    "nodeLabel must be unique",
    "create",
    obj("Topology", KAI, "kai-twice", {"levels": levels(RACK, RACK)}),
    obj("Topology", KAI, "kai-twice", {"levels": levels(BLOCK, RACK)}),
)
case(
    "kai-topology-v1alpha1-hostname-lowest",
    "Topology",
    "v1alpha1",
    "spec.levels",
    "the kubernetes.io/hostname label can only be used at the lowest level of topology",
    "create",
    obj("Topology", KAI, "kai-host", {"levels": levels(HOST, RACK)}),
    obj("Topology", KAI, "kai-host", {"levels": levels(RACK, HOST)}),
)


def main() -> None:
    """Rewrite the case folders and the index."""
    for path in HERE.iterdir():
        if path.is_dir():
            shutil.rmtree(path)
    index = []
    for c in CASES:
        folder = HERE / c["id"]
        folder.mkdir()
        entry = {k: v for k, v in c.items() if k != "files"}
        for role, content in c["files"].items():
            if content is not None:
                (folder / f"{role}.yaml").write_text(yaml.safe_dump(content, sort_keys=False))
        index.append(entry)
    ids = [c["id"] for c in CASES]
    assert len(ids) == len(set(ids)), "case ids must be unique"
    header = "# Written by make_cases.py: one entry per case folder.\n"
    (HERE / "cases.yaml").write_text(header + yaml.safe_dump(index, sort_keys=False, width=200))


if __name__ == "__main__":
    main()
