"""Which GPU devices a DRA cluster's workers got: read live from their ResourceClaims.

The scheduler writes each claim's allocation (``status.allocation.devices.results``:
driver, pool, device) and the node it is on; the driver's ResourceSlice of that node says
what each device is (product, MIG profile, UUID). One LIST of the request's claims (its
claim templates label them) and one LIST of slices per node they are on. Only for DRA
flavors: an extended-resource worker's GPUs are the device plugin's and no claim says
which (docs/dra.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from clusters.domain.states import State
from clusters.kube import labels
from clusters.kube.connection import gateway_of
from clusters.kube.gateway import Gateway, KubeError
from clusters.models import ClusterRequest

RESOURCE = "resource.k8s.io/v1"
# States in which workers may hold devices.
HOLDING = frozenset({State.PROVISIONING, State.READY, State.STARTING, State.RUNNING})


@dataclass(frozen=True)
class GpuDevice:
    """One device allocated to one worker pod's claim."""

    pod: str
    node: str
    claim: str
    driver: str
    pool: str
    device: str
    product: str
    mig_profile: str
    uuid: str


@dataclass(frozen=True)
class DevicesRead:
    """The devices found, or ``error`` in plain words when the claims could not be read."""

    devices: list[GpuDevice]
    error: str = ""


def wants_devices(cluster: ClusterRequest) -> bool:
    """Whether the cluster's page and detail show its devices: a DRA flavor, while its
    workers may hold some."""
    flavor = cluster.flavor
    return bool(flavor is not None and flavor.uses_dra and cluster.state in HOLDING)


def _node_of(allocation: dict[str, Any]) -> str:
    """The node a claim was allocated on (the scheduler's node selector names it)."""
    for term in (allocation.get("nodeSelector") or {}).get("nodeSelectorTerms") or []:
        for field in term.get("matchFields") or []:
            if field.get("key") == "metadata.name" and field.get("values"):
                return str(field["values"][0])
    return ""


def _pod_of(claim: dict[str, Any]) -> str:
    for owner in claim["metadata"].get("ownerReferences") or []:
        if owner.get("kind") == "Pod":
            return str(owner.get("name", ""))
    return ""


def _attribute(device: dict[str, Any], name: str) -> str:
    value = (device.get("attributes") or {}).get(name) or {}
    return str(value.get("string") or value.get("version") or "")


def _slice_devices(gw: Gateway, node: str) -> dict[tuple[str, str, str], dict[str, Any]]:
    """The devices the drivers publish on ``node``, by (driver, pool, device)."""
    found = {}
    for sl in gw.list(RESOURCE, "ResourceSlice", field_selector=f"spec.nodeName={node}"):
        spec = sl.get("spec") or {}
        pool = (spec.get("pool") or {}).get("name", "")
        for device in spec.get("devices") or []:
            found[(str(spec.get("driver", "")), str(pool), str(device.get("name", "")))] = device
    return found


def cluster_devices(cluster: ClusterRequest) -> DevicesRead:
    """The devices allocated to the request's worker claims, by pod then device."""
    selector = f"{labels.CLUSTER_ID}={cluster.pk},{labels.managed_selector()}"
    try:
        gw = gateway_of(cluster)  # a gateway that cannot be built is an unreachable one
        claims = gw.list(
            RESOURCE, "ResourceClaim", namespace=cluster.namespace, label_selector=selector
        )
        allocated = [(c, (c.get("status") or {}).get("allocation") or {}) for c in claims]
        nodes = sorted({_node_of(a) for _, a in allocated if a} - {""})
        published = {}
        for node in nodes:
            published.update(_slice_devices(gw, node))
    except KubeError as exc:
        return DevicesRead([], error=f"The cluster's device claims could not be read: {exc}")
    devices = []
    for claim, allocation in allocated:
        node = _node_of(allocation)
        for result in (allocation.get("devices") or {}).get("results") or []:
            key = (
                str(result.get("driver", "")),
                str(result.get("pool", "")),
                str(result.get("device", "")),
            )
            about = published.get(key, {})
            devices.append(
                GpuDevice(
                    pod=_pod_of(claim),
                    node=node,
                    claim=claim["metadata"]["name"],
                    driver=key[0],
                    pool=key[1],
                    device=key[2],
                    product=_attribute(about, "productName"),
                    mig_profile=_attribute(about, "profile"),
                    uuid=_attribute(about, "uuid"),
                )
            )
    return DevicesRead(sorted(devices, key=lambda d: (d.pod, d.device)))
