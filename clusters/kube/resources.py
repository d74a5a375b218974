"""The kinds of object gangway reads and writes, with their API paths: a fixed table,
and each workload kind's own object (:mod:`clusters.domain.workload_kinds`)."""

from __future__ import annotations

from dataclasses import dataclass

from clusters.domain import workload_kinds
from clusters.kube.errors import PermanentKubeError


@dataclass(frozen=True)
class Kind:
    """Where a kind lives in the API: its group/version, plural and scope."""

    api_version: str
    kind: str
    plural: str
    namespaced: bool = True

    def path(self, namespace: str | None = None, name: str | None = None) -> str:
        """The REST path of the collection (or of one object when ``name`` is given)."""
        base = "/api/v1" if self.api_version == "v1" else f"/apis/{self.api_version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        return f"{base}/{name}" if name else base


_KINDS = [
    Kind("v1", "Namespace", "namespaces", namespaced=False),
    Kind("v1", "ServiceAccount", "serviceaccounts"),
    Kind("v1", "ResourceQuota", "resourcequotas"),
    Kind("v1", "LimitRange", "limitranges"),
    Kind("v1", "Pod", "pods"),
    Kind("v1", "Service", "services"),
    Kind("v1", "Secret", "secrets"),
    Kind("v1", "Event", "events"),
    Kind("v1", "Node", "nodes", namespaced=False),
    Kind("v1", "PodTemplate", "podtemplates"),
    Kind("autoscaling.x-k8s.io/v1", "ProvisioningRequest", "provisioningrequests"),
    Kind("networking.k8s.io/v1", "NetworkPolicy", "networkpolicies"),
    Kind("kueue.x-k8s.io/v1beta2", "ResourceFlavor", "resourceflavors", namespaced=False),
    Kind("kueue.x-k8s.io/v1beta2", "ClusterQueue", "clusterqueues", namespaced=False),
    Kind("kueue.x-k8s.io/v1beta2", "Cohort", "cohorts", namespaced=False),
    Kind("kueue.x-k8s.io/v1beta2", "LocalQueue", "localqueues"),
    Kind("kueue.x-k8s.io/v1beta2", "Workload", "workloads"),
    Kind("kueue.x-k8s.io/v1beta2", "AdmissionCheck", "admissionchecks", namespaced=False),
    Kind("kueue.x-k8s.io/v1beta2", "MultiKueueCluster", "multikueueclusters", namespaced=False),
    Kind("kueue.x-k8s.io/v1beta2", "MultiKueueConfig", "multikueueconfigs", namespaced=False),
    Kind(
        "kueue.x-k8s.io/v1beta2",
        "ProvisioningRequestConfig",
        "provisioningrequestconfigs",
        namespaced=False,
    ),
    Kind(
        "kueue.x-k8s.io/v1beta2",
        "WorkloadPriorityClass",
        "workloadpriorityclasses",
        namespaced=False,
    ),
    Kind("kueue.x-k8s.io/v1beta2", "Topology", "topologies", namespaced=False),
    Kind("scheduling.run.ai/v2", "Queue", "queues", namespaced=False),
    Kind("scheduling.k8s.io/v1", "PriorityClass", "priorityclasses", namespaced=False),
    Kind("kai.scheduler/v1alpha1", "Topology", "topologies", namespaced=False),
    # DRA flavors: claim templates applied per request; claims, slices and classes read.
    Kind("resource.k8s.io/v1", "ResourceClaimTemplate", "resourceclaimtemplates"),
    Kind("resource.k8s.io/v1", "ResourceClaim", "resourceclaims"),
    Kind("resource.k8s.io/v1", "ResourceSlice", "resourceslices", namespaced=False),
    Kind("resource.k8s.io/v1", "DeviceClass", "deviceclasses", namespaced=False),
]
KINDS: dict[tuple[str, str], Kind] = {(k.api_version, k.kind): k for k in _KINDS}


def kind_of(api_version: str, kind: str) -> Kind:
    """The :class:`Kind` for an apiVersion/kind pair, the table's or a workload kind's
    object; unknown kinds are a programming error."""
    try:
        return KINDS[(api_version, kind)]
    except KeyError:
        pass
    # Built once per registry (cleared when a kind is registered or dropped), not kept in
    # KINDS: a kind registered for a while (a test's) leaves nothing behind.
    found = workload_kinds.derived("object kinds", _object_kinds).get((api_version, kind))
    if found is not None:
        return found
    raise PermanentKubeError(f"gangway does not know the kind {api_version}/{kind}")


def _object_kinds() -> dict[tuple[str, str], Kind]:
    """The object of every registered workload kind, by apiVersion and kind."""
    return {
        (w.api_version, w.object_kind): Kind(w.api_version, w.object_kind, w.plural)
        for w in workload_kinds.kinds().values()
    }
