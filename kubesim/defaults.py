"""Defaulting of new built-in objects, as the API server does it before admission.

Pods get the spec defaults Kubernetes fills in (scheduler name, restart and DNS policy,
container pull and termination settings, a request for every limit) and their initial
status (``Pending`` with a QoS class); Services get a type, a cluster IP from the
cluster's allocator and node ports; Namespaces the ``kubernetes`` finalizer, ``Active``
phase and the ``kubernetes.io/metadata.name`` label.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubesim.admission import pod_totals
from kubesim.store import Obj

if TYPE_CHECKING:
    from kubesim.controller import ClusterView

DEFAULT_SCHEDULER = "default-scheduler"


def default_pod(pod: Obj) -> None:
    """Fill the pod spec defaults and the initial status of a new pod."""
    spec = pod.setdefault("spec", {})
    spec.setdefault("schedulerName", DEFAULT_SCHEDULER)
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("priority", 0)
    spec.setdefault("enableServiceLinks", True)
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    for c in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        res = c.get("resources") or {}
        if res.get("limits"):
            # As the API server defaults it: a limit without a request is the request.
            requests = res.setdefault("requests", {})
            for k, v in res["limits"].items():
                requests.setdefault(k, v)
        c.setdefault("imagePullPolicy", "IfNotPresent")
        c.setdefault("terminationMessagePath", "/dev/termination-log")
        c.setdefault("terminationMessagePolicy", "File")
    req, lim = pod_totals(pod)
    guaranteed = (
        bool(lim)
        and all(lim.get(k) == req.get(k) for k in ("cpu", "memory"))
        and "cpu" in lim
        and "memory" in lim
    )
    pod["status"] = {
        "phase": "Pending",
        "qosClass": "Guaranteed" if guaranteed else ("Burstable" if req or lim else "BestEffort"),
    }


def default_service(svc: Obj, cluster: ClusterView) -> None:
    """Fill a new Service's defaults: type ClusterIP, a cluster IP (unless headless),
    port protocols and target ports, node ports for NodePort and LoadBalancer."""
    spec = svc.setdefault("spec", {})
    spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    if spec.get("clusterIP") != "None":
        spec["clusterIP"] = spec.get("clusterIP") or cluster.next_service_ip()
        spec["clusterIPs"] = [spec["clusterIP"]]
    for i, port in enumerate(spec.get("ports") or []):
        port.setdefault("protocol", "TCP")
        port.setdefault("targetPort", port.get("port"))
        if spec["type"] in ("NodePort", "LoadBalancer") and "nodePort" not in port:
            port["nodePort"] = 30000 + (cluster.svc_counter * 7 + i) % 2768
    svc.setdefault("status", {"loadBalancer": {}})


def default_namespace(ns: Obj) -> None:
    """A new Namespace: the ``kubernetes`` finalizer, ``Active``, its name as a label."""
    ns.setdefault("spec", {})["finalizers"] = ["kubernetes"]
    ns["status"] = {"phase": "Active"}
    meta = ns["metadata"]
    meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = meta.get("name", "")
