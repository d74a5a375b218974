"""What gangway does on a member cluster, as RBAC rules and custom resources: the access
reviews and the CRD check of a credential check ask exactly this, and the ClusterRole an
admin grants (``manage.py kubecluster rbac``, docs/fleet.md) is written from it.

One credential serves a member's worker and web, so the rules are the union of
deploy/base/rbac.yaml's two roles (and deploy/components/ for Kueue and KAI);
tests/clusters/members/test_access.py holds the two equal.
"""

from __future__ import annotations

from dataclasses import dataclass

import yaml

from clusters.domain import workload_kinds

READ = ("get", "list")
WATCH = ("get", "list", "watch")
APPLY = ("get", "list", "create", "patch")


@dataclass(frozen=True)
class Rule:
    """Verbs on resources of one API group, and why gangway needs them."""

    group: str
    resources: tuple[str, ...]
    verbs: tuple[str, ...]
    why: str


def _always() -> list[Rule]:
    workload_groups: dict[str, list[str]] = {}
    for kind in workload_kinds.kinds().values():
        group = kind.api_version.rpartition("/")[0]
        workload_groups.setdefault(group, []).append(kind.plural)
    return [
        Rule("", ("namespaces",), (*WATCH, "create", "patch"), "tenant namespaces"),
        Rule(
            "",
            ("serviceaccounts", "resourcequotas", "limitranges"),
            APPLY,
            "each tenant namespace's account, quota and limits",
        ),
        Rule("networking.k8s.io", ("networkpolicies",), APPLY, "tenant isolation"),
        Rule("", ("pods", "events", "nodes"), WATCH, "readiness, pending reasons, capacity"),
        Rule("", ("pods",), ("patch",), "the preemption notice, as annotations on live pods"),
        Rule("", ("services",), READ, "Ray head services"),
        Rule(
            "",
            ("services/proxy",),
            ("get", "create", "update", "patch", "delete"),
            "Ray dashboards through the service proxy",
        ),
        Rule("", ("pods/log",), ("get",), "a job's driver output"),
        Rule("", ("pods/portforward",), ("get", "create"), "tunnels to a head pod"),
        Rule(
            "",
            ("podtemplates",),
            (*APPLY, "delete"),
            "capacity on demand (the ProvisioningRequest's pod templates)",
        ),
        Rule(
            "autoscaling.x-k8s.io",
            ("provisioningrequests",),
            (*APPLY, "delete"),
            "capacity on demand",
        ),
        *[
            Rule(group, tuple(plurals), (*WATCH, "create", "patch", "delete"), "workloads")
            for group, plurals in workload_groups.items()
        ],
        Rule("", ("secrets",), ("create", "patch", "delete"), "SSH keys (written, never read)"),
        Rule(
            "resource.k8s.io",
            ("deviceclasses", "resourceslices", "resourceclaims"),
            WATCH,
            "DRA flavors: free devices, and the devices a worker got (docs/dra.md)",
        ),
        Rule(
            "resource.k8s.io",
            ("resourceclaimtemplates",),
            (*APPLY, "delete"),
            "DRA flavors: a claim template per GPU worker group",
        ),
    ]


KUEUE = [
    Rule(
        "kueue.x-k8s.io",
        (
            "resourceflavors",
            "clusterqueues",
            "localqueues",
            "workloadpriorityclasses",
            "admissionchecks",
            "provisioningrequestconfigs",
            "topologies",
        ),
        APPLY,
        "Kueue's queues, written from gangway's tables",
    ),
    Rule("kueue.x-k8s.io", ("cohorts",), (*APPLY, "delete"), "the cohort tree"),
    Rule(
        "kueue.x-k8s.io",
        ("multikueueclusters", "multikueueconfigs", "admissionchecks"),
        (*APPLY, "delete"),
        "MultiKueue's workers and configs on the manager (several members)",
    ),
    Rule("kueue.x-k8s.io", ("workloads",), READ, "Kueue's admission verdicts"),
    Rule(
        "visibility.kueue.x-k8s.io",
        ("localqueues/pendingworkloads",),
        ("get",),
        "queue positions",
    ),
]
KAI = [
    Rule("scheduling.run.ai", ("queues",), APPLY, "KAI's queues (fractional GPUs)"),
    Rule("kai.scheduler", ("topologies",), APPLY, "KAI's Topology of each flavor with levels"),
    Rule(
        "scheduling.k8s.io",
        ("priorityclasses",),
        APPLY,
        "a PriorityClass per platform priority class, named by KAI workloads' label",
    ),
]


def rules(*, queue_mode: str, kai_enabled: bool) -> list[Rule]:
    """The rules gangway needs on a member in this deployment's modes."""
    found = _always()
    if queue_mode == "kueue":
        found += KUEUE
    if kai_enabled:
        found += KAI
    return found


# The custom resources' API groups and the operator each belongs to.
OPERATORS = {
    "ray.io": "KubeRay",
    "kueue.x-k8s.io": "Kueue",
    "scheduling.run.ai": "KAI Scheduler",
    "kai.scheduler": "KAI Scheduler",
    "autoscaling.x-k8s.io": "Cluster Autoscaler (ProvisioningRequest)",
}
# Where each group's resources are served (the versions gangway speaks).
GROUP_VERSIONS = {
    "ray.io": "ray.io/v1",
    "kueue.x-k8s.io": "kueue.x-k8s.io/v1beta2",
    "scheduling.run.ai": "scheduling.run.ai/v2",
    "kai.scheduler": "kai.scheduler/v1alpha1",
    "autoscaling.x-k8s.io": "autoscaling.x-k8s.io/v1",
}


def required_crds(*, queue_mode: str, kai_enabled: bool) -> list[str]:
    """``plural.group`` of each custom resource a member must serve in these modes:
    the workload kinds' (KubeRay), Kueue's in kueue mode, KAI's with KAI. The
    ProvisioningRequest is optional: only a flavor whose nodes grow uses it."""
    needed = [
        f"{resource.partition('/')[0]}.{rule.group}"
        for rule in rules(queue_mode=queue_mode, kai_enabled=kai_enabled)
        if rule.group in GROUP_VERSIONS and rule.group != "autoscaling.x-k8s.io"
        for resource in rule.resources
    ]
    return list(dict.fromkeys(needed))


def cluster_role(*, queue_mode: str, kai_enabled: bool, name: str = "gangway-member") -> str:
    """The ClusterRole (YAML) that grants :func:`rules`, to bind to gangway's identity."""
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/name": "gangway"}},
        "rules": [
            {"apiGroups": [r.group], "resources": list(r.resources), "verbs": list(r.verbs)}
            for r in rules(queue_mode=queue_mode, kai_enabled=kai_enabled)
        ],
    }
    return yaml.safe_dump(role, sort_keys=False, default_flow_style=None, width=100)
