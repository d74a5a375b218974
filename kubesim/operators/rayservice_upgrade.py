"""KubeRay's RayService upgrade rules (v1.7): when a RayService's ``rayClusterConfig`` calls
for a new RayCluster, an in-place update, or nothing, and the traffic steps of
``NewClusterWithIncrementalUpgrade``.

A spec whose hash (``ray.io/hash-without-replicas-and-workers-to-delete``) differs from the
cluster's prepares a pending cluster unless ``upgradeStrategy.type`` is ``None``; one that
only appends worker groups updates the cluster in place. kubesim/README.md (*KubeRay for
RayService*) says how the incremental upgrade moves capacity and traffic.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
from typing import Any

from kubesim.store import Obj
from kubesim.util import get_path, owner_ref, suffix

KUBERAY_VERSION = "v1.7.0"
HASH_KEY = "ray.io/hash-without-replicas-and-workers-to-delete"
NUM_GROUPS_KEY = "ray.io/num-worker-groups"
VERSION_KEY = "ray.io/kuberay-version"
INCREMENTAL = "NewClusterWithIncrementalUpgrade"


def cluster_hash(spec: dict[str, Any], groups: int | None = None) -> str:
    """The hash KubeRay compares: the spec without suspend, worker replicas and
    workersToDelete (only the first ``groups`` worker groups when given)."""
    spec = copy.deepcopy(spec)
    spec.pop("suspend", None)
    workers = spec.get("workerGroupSpecs") or []
    if groups is not None:
        workers = workers[:groups]
    for g in workers:
        g.pop("replicas", None)
        (g.get("scaleStrategy") or {}).pop("workersToDelete", None)
    spec["workerGroupSpecs"] = workers
    digest = hashlib.sha1(json.dumps(spec, sort_keys=True).encode()).digest()
    return base64.b32encode(digest).decode()


def held(rs: Obj) -> bool:
    """Whether ``spec.rayClusterConfig.suspend`` is true: Kueue's RayService integration
    holds a queued service so. No RayCluster is created for it meanwhile (Kueue's admission
    writes the flavors' node labels into the config first), and its existing clusters
    follow the flag in place (kubesim's reading: an evicted service stops its pods)."""
    return bool(get_path(rs, "spec", "rayClusterConfig", "suspend"))


def strategy(rs: Obj) -> str:
    """``upgradeStrategy.type``; unset is ``NewCluster`` (ENABLE_ZERO_DOWNTIME's default)."""
    return str(get_path(rs, "spec", "upgradeStrategy", "type") or "NewCluster")


def incremental(rs: Obj) -> bool:
    """Whether the RayService upgrades incrementally."""
    return strategy(rs) == INCREMENTAL


def options(rs: Obj) -> dict[str, Any]:
    """``clusterUpgradeOptions`` with KubeRay's default for ``maxSurgePercent``."""
    opts = dict(get_path(rs, "spec", "upgradeStrategy", "clusterUpgradeOptions") or {})
    opts.setdefault("maxSurgePercent", 100)
    return opts


def new_name(rs: Obj) -> str:
    """KubeRay's ``GenerateRayClusterName``."""
    return f"{rs['metadata']['name']}-raycluster-{suffix()}"


def build_cluster(rs: Obj, name: str) -> Obj:
    """``constructRayClusterForRayService``: labels and annotations of the RayService plus
    KubeRay's, the hash annotations, a controller ownerReference."""
    meta = rs["metadata"]
    spec = copy.deepcopy(get_path(rs, "spec", "rayClusterConfig", default={}))
    labels = dict(meta.get("labels") or {})
    labels["ray.io/originated-from-cr-name"] = meta["name"]
    labels["ray.io/originated-from-crd"] = "RayService"
    annotations = dict(meta.get("annotations") or {})
    annotations[HASH_KEY] = cluster_hash(spec)
    annotations[NUM_GROUPS_KEY] = str(len(spec.get("workerGroupSpecs") or []))
    annotations[VERSION_KEY] = KUBERAY_VERSION
    active = get_path(rs, "status", "activeServiceStatus", "rayClusterName")
    if incremental(rs) and active:
        # The pending cluster autoscales from minReplicas as its target capacity grows.
        for g in spec.get("workerGroupSpecs") or []:
            g.pop("replicas", None)
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {
            "name": name,
            "namespace": meta["namespace"],
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [owner_ref(rs)],
        },
        "spec": spec,
    }


def _hash_equal(rs: Obj, rc: Obj, partial: bool) -> bool:
    ann = rc["metadata"].get("annotations") or {}
    goal = get_path(rs, "spec", "rayClusterConfig", default={})
    if not partial:
        return ann.get(HASH_KEY) == cluster_hash(goal)
    try:
        groups = int(ann.get(NUM_GROUPS_KEY, ""))
    except ValueError:
        return True
    if len(goal.get("workerGroupSpecs") or []) < groups:
        return False
    return ann.get(HASH_KEY) == cluster_hash(goal, groups)


def should_update(rs: Obj, rc: Obj | None, active: bool, upgrading: bool) -> bool:
    """``shouldUpdateCluster``: only new worker groups appended are updated in place."""
    if rc is None or (active and upgrading):
        return False
    if bool(get_path(rc, "spec", "suspend")) != held(rs):
        return True
    if active and (rc["metadata"].get("annotations") or {}).get(VERSION_KEY) != KUBERAY_VERSION:
        return True
    if _hash_equal(rs, rc, False):
        return False
    return _hash_equal(rs, rc, True)


def should_prepare(rs: Obj, active: Obj | None, pending: Obj | None, serving: bool) -> bool:
    """``shouldPrepareNewCluster``."""
    if serving:
        return False
    if active is None and pending is None:
        # A held service names its first cluster once and creates it when released.
        return not (held(rs) and get_path(rs, "status", "pendingServiceStatus", "rayClusterName"))
    rc = pending if pending is not None else active
    assert rc is not None
    if _hash_equal(rs, rc, False) or _hash_equal(rs, rc, True):
        return False
    return strategy(rs) in ("NewCluster", INCREMENTAL)


def updated_cluster(rs: Obj, rc: Obj) -> Obj:
    """``modifyRayCluster``: the goal spec, labels and annotations, keeping ``suspend``
    unless the RayService's config sets it (:func:`held`)."""
    goal = build_cluster(rs, rc["metadata"]["name"])
    new = copy.deepcopy(rc)
    suspend = (rc.get("spec") or {}).get("suspend")
    new["spec"] = goal["spec"]
    if suspend is not None and "suspend" not in goal["spec"]:
        new["spec"]["suspend"] = suspend
    new["metadata"]["labels"] = goal["metadata"]["labels"]
    new["metadata"]["annotations"] = goal["metadata"]["annotations"]
    new["metadata"]["generation"] = int(rc["metadata"].get("generation", 1)) + 1
    return new


def capacity_goal(rs: Obj, st: dict[str, Any], which: str) -> int | None:
    """``reconcileServeTargetCapacity`` for the ``active`` or ``pending`` cluster: its
    next target capacity, or None when it is not its turn."""
    act, pen = st["activeServiceStatus"], st["pendingServiceStatus"]
    act_tc = int(act.get("targetCapacity", 100))
    pen_tc = int(pen.get("targetCapacity", 0))
    if pen_tc != int(pen.get("trafficRoutedPercent", 0)):
        return None
    surge = int(options(rs)["maxSurgePercent"])
    if which == "active" and act_tc + pen_tc > 100:
        return max(0, act_tc - surge)
    if which == "pending" and act_tc + pen_tc <= 100:
        return min(100, pen_tc + surge)
    return None


def traffic_step(
    rs: Obj, st: dict[str, Any], pending_ready: bool, now: float, last: float | None
) -> tuple[int, int, float | None]:
    """``calculateTrafficRoutedPercent``: (active weight, pending weight, when the next
    step is due or None)."""
    act, pen = st["activeServiceStatus"], st["pendingServiceStatus"]
    a = int(act.get("trafficRoutedPercent", 100))
    p = int(pen.get("trafficRoutedPercent", 0))
    cap = int(pen.get("targetCapacity", 0))
    if p == cap:
        return a, p, None
    opts = options(rs)
    interval = float(opts.get("intervalSeconds") or 1)
    if last is not None and now - last < interval:
        return a, p, last + interval
    if not pending_ready:
        return a, p, None
    p = min(100, p + int(opts.get("stepSizePercent") or 0), cap)
    return 100 - p, p, now + interval


def validate(rs: Obj) -> str | None:
    """KubeRay's ``ValidateRayServiceSpec`` (the rules emulated), else None."""
    spec = rs.get("spec") or {}
    head_svc = get_path(
        spec, "rayClusterConfig", "headGroupSpec", "headService", "metadata", "name"
    )
    if head_svc:
        return (
            "The RayService spec is invalid: spec.rayClusterConfig.headGroupSpec.headService."
            "metadata.name should not be set"
        )
    kind = get_path(spec, "upgradeStrategy", "type")
    if kind is not None and kind not in ("None", "NewCluster", INCREMENTAL):
        return (
            f"The RayService spec is invalid: Spec.UpgradeStrategy.Type value {kind} is invalid, "
            f"valid options are {INCREMENTAL}, NewCluster, or None"
        )
    delay = spec.get("rayClusterDeletionDelaySeconds")
    if delay is not None and int(delay) < 0:
        return (
            "The RayService spec is invalid: Spec.RayClusterDeletionDelaySeconds should be a "
            f"non-negative integer, got {delay}"
        )
    if kind == INCREMENTAL:
        why = _check_incremental(spec)
        if why:
            return f"The RayService spec is invalid: {why}"
    return None


def _check_incremental(spec: dict[str, Any]) -> str | None:
    if not get_path(spec, "rayClusterConfig", "enableInTreeAutoscaling"):
        return "Ray Autoscaler is required for NewClusterWithIncrementalUpgrade"
    opts = get_path(spec, "upgradeStrategy", "clusterUpgradeOptions")
    if not opts:
        return "ClusterUpgradeOptions are required for NewClusterWithIncrementalUpgrade"
    surge = int(opts.get("maxSurgePercent", 100))
    if not 0 <= surge <= 100:
        return "maxSurgePercent must be between 0 and 100"
    step = opts.get("stepSizePercent")
    if step is None or not 0 <= int(step) <= 100:
        return "stepSizePercent must be between 0 and 100"
    if int(step) > surge:
        return "stepSizePercent must be less than or equal to maxSurgePercent"
    if not opts.get("intervalSeconds") or int(opts["intervalSeconds"]) <= 0:
        return "intervalSeconds must be greater than 0"
    if not opts.get("gatewayClassName"):
        return "gatewayClassName is required for NewClusterWithIncrementalUpgrade"
    return None
