"""The cluster autoscaler's vocabulary: ProvisioningRequest classes, annotations and
condition reasons as cluster-autoscaler writes them, its timing defaults, node groups and
nodes asked of the cloud, and the condition helpers the autoscaler and Kueue share."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from kubesim.node_fit import PodKey
from kubesim.store import Obj
from kubesim.util import get_path

PR = "provisioningrequests.autoscaling.x-k8s.io"
PT = "podtemplates"
CLASS_ATOMIC = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
CLASS_CHECK = "check-capacity.autoscaling.x-k8s.io"
HANDLED_CLASSES = (CLASS_ATOMIC, CLASS_CHECK)
CONSUME = "autoscaling.x-k8s.io/consume-provisioning-request"
CONSUME_DEPRECATED = "cluster-autoscaler.kubernetes.io/consume-provisioning-request"
COMPONENT = "cluster-autoscaler"
# kubesim's own mark on a node added for a request: which request booked it (ns/name).
BOOKED_FOR = "kubesim.io/provisioning-request"
TO_BE_DELETED = "ToBeDeletedByClusterAutoscaler"

# Defaults (fleet ``autoscaler`` keys in brackets; KubeSim/CLI parameters override them).
# [scaleUpDelay] how long after a scale-up the new nodes register Ready (a cloud VM boot).
DEFAULT_SCALE_UP_DELAY = 30.0
# [scaleDownUnneededTime] CA's --scale-down-unneeded-time: an empty added node goes after it.
DEFAULT_SCALE_DOWN_UNNEEDED_TIME = 600.0
# [provisioningRequestBookingTime] CA's booking of a provisioned request (defaultReservationTime).
DEFAULT_BOOKING_TIME = 600.0
# CA fails a request not provisioned this long after its creation (defaultExpirationTime).
EXPIRATION_SECONDS = 7 * 24 * 3600.0
# CA's --scan-interval: waiting requests are looked at again this often even if nothing
# changed (capacity is re-evaluated on every node or pod change anyway).
SCAN_INTERVAL = 10.0

# Reasons and messages of cluster-autoscaler's provisioningrequest/conditions package.
ACCEPTED = ("Accepted", "ProvisioningRequest is accepted by ClusterAutoscaler")
FOUND = ("CapacityIsFound", "Capacity is found in the cluster")
PROVISIONED = ("CapacityIsProvisioned", "Capacity is found in the cluster")
NOT_FOUND = ("CapacityIsNotFound", "Capacity is not found, CA will try to find it later.")
NOT_FOUND_FINAL = ("CapacityIsNotFound", "CA could not find requested capacity")
BOOKING_EXPIRED = ("CapacityReservationTimeExpired", "Capacity reservation time is expired")
EXPIRED = ("Expired", "ProvisioningRequest is expired")
FAILED_TO_CREATE_PODS = "FailedToCreatePods"

NAME_INDEX = re.compile(r"-(\d+)$")


# A pod waiting for capacity: its key, the pod, the scheduler's signature of it.
Waiting = tuple[PodKey, Obj, str]


@dataclass
class NodeGroup:
    """A pool that may grow: its fleet entry, minimum (the pool's ``count``) and max."""

    name: str
    pool: dict[str, Any]
    min_size: int
    max_size: int


@dataclass
class Upcoming:
    """A node asked of the cloud that has not registered yet."""

    group: str
    name: str
    ready_at: float
    booked_for: str  # "ns/name" of the request it was added for ("" for none)


def cond_true(obj: Obj, ctype: str) -> bool:
    """Whether condition ``ctype`` of ``obj`` is True."""
    return any(
        c.get("type") == ctype and c.get("status") == "True"
        for c in get_path(obj, "status", "conditions", default=[])
    )


def find_cond(obj: Obj, ctype: str) -> dict[str, Any] | None:
    """Condition ``ctype`` of ``obj``, if any."""
    return next(
        (c for c in get_path(obj, "status", "conditions", default=[]) if c.get("type") == ctype),
        None,
    )
