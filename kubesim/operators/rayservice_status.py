"""What KubeRay's RayService controller builds and computes without writing: the head and
serve services of a RayService, the serve endpoints it counts, and its conditions
(``calculateConditions``, ``meta.SetStatusCondition``)."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from kubesim.store import Obj, Store
from kubesim.util import get_path

if TYPE_CHECKING:
    from kubesim.controller import ClusterView

SERVE_LABEL = "ray.io/serve"


def set_condition(
    st: dict[str, Any], ctype: str, status: str, reason: str, message: str, gen: int, at: str
) -> None:
    """``meta.SetStatusCondition``: the transition time moves only with the status."""
    conds = st.setdefault("conditions", [])
    for c in conds:
        if c["type"] == ctype:
            if c["status"] != status:
                c["lastTransitionTime"] = at
            c.update(status=status, reason=reason, message=message, observedGeneration=gen)
            return
    conds.append(
        {
            "type": ctype,
            "status": status,
            "observedGeneration": gen,
            "lastTransitionTime": at,
            "reason": reason,
            "message": message,
        }
    )


def is_true(st: dict[str, Any], ctype: str) -> bool:
    return any(c["type"] == ctype and c["status"] == "True" for c in st.get("conditions") or [])


def pod_ready(pod: Obj) -> bool:
    return get_path(pod, "status", "phase") == "Running" and any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in get_path(pod, "status", "conditions", default=[])
    )


def _labels(rs: Obj) -> dict[str, str]:
    """The labels KubeRay puts on a RayService's services."""
    return {
        "ray.io/originated-from-cr-name": rs["metadata"]["name"],
        "ray.io/originated-from-crd": "RayService",
    }


def head_service(store: Store, rs: Obj, rc: Obj) -> Obj:
    """KubeRay's head service for a RayService, pointing at ``rc``'s head."""
    ns, name = rc["metadata"]["namespace"], rc["metadata"]["name"]
    own = store.get("services", ns, f"{name}-head-svc")
    ports = copy.deepcopy(get_path(own, "spec", "ports", default=[]))
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": f"{rs['metadata']['name']}-head-svc",
            "namespace": ns,
            "labels": {**_labels(rs), "ray.io/node-type": "head"},
        },
        "spec": {
            "type": get_path(rs, "spec", "rayClusterConfig", "headGroupSpec", "serviceType")
            or "ClusterIP",
            "selector": {"ray.io/cluster": name, "ray.io/node-type": "head"},
            "ports": ports,
        },
    }


def serve_service(rs: Obj, rc: Obj) -> Obj:
    """KubeRay's serve service (``BuildServeService``), pointing at ``rc``'s serving pods."""
    ns, name = rc["metadata"]["namespace"], rc["metadata"]["name"]
    rsname = rs["metadata"]["name"]
    containers = get_path(rc, "spec", "headGroupSpec", "template", "spec", "containers", default=[])
    ports = [
        {
            "name": p["name"],
            "port": int(p["containerPort"]),
            "protocol": "TCP",
            "targetPort": int(p["containerPort"]),
        }
        for p in (containers[0].get("ports") or [] if containers else [])
        if p.get("name") == "serve" or str(p.get("name", "")).startswith("serve-")
    ]
    if not ports and not rs["spec"].get("serveService"):
        ports = [{"name": "serve", "port": 8000, "protocol": "TCP", "targetPort": 8000}]
    labels = {**_labels(rs), SERVE_LABEL: f"{rsname}-serve"}
    selector = {"ray.io/cluster": name, SERVE_LABEL: "true"}
    user = rs["spec"].get("serveService")
    if user:
        svc = copy.deepcopy(user)
        svc.update(apiVersion="v1", kind="Service")
        smeta = svc.setdefault("metadata", {})
        smeta["name"] = smeta.get("name") or f"{rsname}-serve-svc"
        smeta["namespace"] = ns
        smeta["labels"] = {**(smeta.get("labels") or {}), **labels}
        sspec = svc.setdefault("spec", {})
        sspec["selector"] = selector
        if ports:
            by_name = {p.get("name"): p for p in sspec.get("ports") or []}
            sspec["ports"] = [by_name.get(p["name"], p) for p in ports]
        return svc
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": f"{rsname}-serve-svc", "namespace": ns, "labels": labels},
        "spec": {
            "type": get_path(rs, "spec", "rayClusterConfig", "headGroupSpec", "serviceType")
            or "ClusterIP",
            "selector": selector,
            "ports": ports,
        },
    }


def endpoints(cluster: ClusterView, svc: Obj | None) -> int:
    """Ready pods behind the serve service whose node runs a Serve proxy."""
    if svc is None:
        return 0
    ns = svc["metadata"]["namespace"]
    sel = svc["spec"].get("selector") or {}
    rc = sel.get("ray.io/cluster", "")
    proxies = dict(cluster.rayserve.nodes(ns, rc)) if (ns, rc) in cluster.rayserve.instances else {}
    # On real Ray every Ray pod's 8000 reaches the head's proxy (``realray.py``).
    real = cluster.rayservice.real.proxy_healthy(ns, rc)
    count = 0
    for pod in cluster.store.iter("pods", ns):
        labels = pod["metadata"].get("labels") or {}
        if all(labels.get(k) == v for k, v in sel.items()) and pod_ready(pod):
            count += real or pod["metadata"]["name"] in proxies
    return count


def conditions(st: dict[str, Any], gen: int, at: str) -> None:
    """``calculateConditions``."""
    if not st.get("conditions"):
        msg = "RayService is initializing"
        set_condition(st, "Ready", "False", "Initializing", msg, gen, at)
        set_condition(st, "UpgradeInProgress", "False", "Initializing", msg, gen, at)
    if st["numServeEndpoints"] > 0:
        set_condition(
            st,
            "Ready",
            "True",
            "NonZeroServeEndpoints",
            "Number of serve endpoints is greater than 0",
            gen,
            at,
        )
    elif is_true(st, "Ready"):
        set_condition(
            st,
            "Ready",
            "False",
            "ZeroServeEndpoints",
            "Number of serve endpoints dropped to 0",
            gen,
            at,
        )
    act = get_path(st, "activeServiceStatus", "rayClusterName")
    pen = get_path(st, "pendingServiceStatus", "rayClusterName")
    if act and pen:
        set_condition(
            st,
            "UpgradeInProgress",
            "True",
            "BothActivePendingClustersExist",
            "Both active and pending Ray clusters exist",
            gen,
            at,
        )
    elif act:
        set_condition(
            st,
            "UpgradeInProgress",
            "False",
            "NoPendingCluster",
            "Active Ray cluster exists and no pending Ray cluster",
            gen,
            at,
        )
    else:
        cur = next((c for c in st["conditions"] if c["type"] == "UpgradeInProgress"), None)
        if cur is None or cur["reason"] not in ("Initializing", "InitializingTimeout"):
            set_condition(
                st,
                "UpgradeInProgress",
                "Unknown",
                "NoActiveCluster",
                "No active Ray cluster exists, and the RayService is not initializing. "
                "Please open a GitHub issue in the KubeRay repository.",
                gen,
                at,
            )
