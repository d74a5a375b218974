"""An emulation of the KubeRay operator (v1.7) for RayCluster objects.

For every RayCluster it keeps a head service ``<name>-head-svc``, one head pod and the
desired worker pods of each group (labels and ownerReferences as KubeRay sets them), deletes
every pod while ``spec.suspend`` is true, and writes the status KubeRay writes: ``state``,
the conditions, replica counts, desired resources, endpoints and head addresses. Pod
creation refused by admission (ResourceQuota) becomes a Warning event and a
``ReplicaFailure`` condition, retried when the namespace's quota usage changes. With
in-tree autoscaling the head gets the autoscaler sidecar and its RBAC objects
(``autoscalersidecar.py``) and only ``workersToDelete`` removes workers.
"""

from __future__ import annotations

import copy
from collections import Counter
from typing import TYPE_CHECKING, Any

from kubesim import quantity
from kubesim.admission import pod_totals
from kubesim.errors import ApiError
from kubesim.operators import autoscalersidecar as sidecar
from kubesim.resources import ResourceType
from kubesim.store import Obj
from kubesim.util import get_path, now, owner_ref, suffix

if TYPE_CHECKING:
    from kubesim.controller import ClusterView

KEY = "rayclusters.ray.io"
DEFAULT_PORTS = {"client": 10001, "gcs-server": 6379, "dashboard": 8265}
ClusterKey = tuple[str, str]


def _is_ready(pod: Obj) -> bool:
    status = pod.get("status") or {}
    if status.get("phase") != "Running" or pod["metadata"].get("deletionTimestamp"):
        return False
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )


def desired_workers(group: dict[str, Any]) -> int:
    """Replicas of a worker group as KubeRay counts them (clamped, times numOfHosts)."""
    if group.get("suspend"):
        return 0
    lo = int(group.get("minReplicas") or 0)
    top = group.get("maxReplicas")
    hi = int(top) if top is not None else 2**31 - 1
    want = group.get("replicas")
    replicas = int(want) if want is not None else lo
    replicas = max(lo, min(hi, replicas))
    return replicas * max(1, int(group.get("numOfHosts") or 1))


# The managedBy value of RayClusters KubeRay reconciles (unset means it too).
MANAGER = "ray.io/kuberay-operator"


class KubeRay:
    """Reconciles RayClusters into pods, a head service and status."""

    def __init__(self, cluster: ClusterView) -> None:
        self.cluster = cluster
        self.reset()

    def reset(self) -> None:
        """Forget pending work."""
        self.dirty: set[ClusterKey] = set()
        self.blocked: dict[str, set[str]] = {}
        # Clusters whose head names a service account not created yet: (ns, account) -> names.
        self.waiting_sa: dict[tuple[str, str], set[str]] = {}

    def on_change(self, rt: ResourceType, old: Obj | None, new: Obj | None) -> None:
        """RayCluster writes and writes of owned pods/services mark the cluster dirty."""
        ref = new if new is not None else old
        assert ref is not None
        meta = ref["metadata"]
        if rt.key == KEY:
            key = (meta["namespace"], meta["name"])
            if new is None:
                self.dirty.discard(key)
                self.blocked.get(key[0], set()).discard(key[1])
            elif old is not new:
                # Only writes by others: our own in-place status writes must not loop.
                self.dirty.add(key)
        elif rt.kind == "ServiceAccount" and new is not None and old is None:
            for name in self.waiting_sa.pop((meta["namespace"], meta["name"]), set()):
                self.dirty.add((meta["namespace"], name))
        elif rt.kind in ("Pod", "Service"):
            for owner in meta.get("ownerReferences") or []:
                if owner.get("kind") == "RayCluster":
                    self.dirty.add((meta["namespace"], owner["name"]))

    def quota_changed(self, ns: str) -> None:
        """Retry clusters whose pods quota refused, now that usage changed."""
        for name in self.blocked.pop(ns, set()):
            self.dirty.add((ns, name))

    def reconcile(self) -> bool:
        """Reconcile every dirty RayCluster; True when anything was written."""
        busy = False
        while self.dirty:
            ns, name = self.dirty.pop()
            rc = self.cluster.store.get(KEY, ns, name)
            if rc is None or rc["metadata"].get("deletionTimestamp"):
                continue
            if (rc.get("spec") or {}).get("managedBy") not in (None, "", MANAGER):
                continue  # another controller's (MultiKueue's, on a manager cluster)
            busy = self._reconcile_one(rc) or busy
        return busy

    # -- children ----------------------------------------------------------------------

    def _owned(self, rc: Obj, key: str) -> list[Obj]:
        out = []
        for k, ns, name in self.cluster.store.dependents(rc["metadata"]["uid"]):
            if k == key:
                obj = self.cluster.store.get(k, ns, name)
                if obj is not None and not obj["metadata"].get("deletionTimestamp"):
                    out.append(obj)
        return out

    def _labels(self, rc: Obj, node_type: str, group: str) -> dict[str, str]:
        name = rc["metadata"]["name"]
        return {
            "ray.io/cluster": name,
            "ray.io/node-type": node_type,
            "ray.io/group": group,
            "ray.io/is-ray-node": "yes",
            "ray.io/identifier": f"{name}-{node_type}",
            "app.kubernetes.io/name": "kuberay",
            "app.kubernetes.io/created-by": "kuberay-operator",
        }

    def _pod(self, rc: Obj, template: dict[str, Any], node_type: str, group: str) -> Obj:
        name = rc["metadata"]["name"]
        meta = copy.deepcopy(template.get("metadata") or {})
        labels = dict(meta.get("labels") or {})
        labels.update(self._labels(rc, node_type, group))
        if (
            node_type == "worker"
            and rc["metadata"].get("labels", {}).get("ray.io/originated-from-crd") == "RayService"
        ):
            # KubeRay's pod builder: a RayService's workers join its serve service.
            labels.setdefault("ray.io/serve", "true")
        pod_name = (
            f"{name}-head-{suffix()}"
            if node_type == "head"
            else f"{name}-{group}-worker-{suffix()}"
        )
        annotations = dict(meta.get("annotations") or {})
        annotations.setdefault("ray.io/ft-enabled", "false")
        pod_spec = copy.deepcopy(template.get("spec") or {})
        if node_type == "head":
            pod_spec = sidecar.head_pod_spec(rc, pod_spec)
        else:
            pod_spec = sidecar.worker_pod_spec(rc, pod_spec)
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": pod_name,
                "namespace": rc["metadata"]["namespace"],
                "labels": labels,
                "annotations": annotations,
                "ownerReferences": [owner_ref(rc)],
            },
            "spec": pod_spec,
        }

    def _create(self, rc: Obj, obj: Obj, reason: str) -> str | None:
        """Create a child; return the admission error message if it was refused."""
        kind = obj["kind"]
        rt = self.cluster.rt("pods" if kind == "Pod" else "services")
        try:
            self.cluster.create_object(rt, obj)
        except ApiError as exc:
            self.cluster.record_event(
                rc,
                "Warning",
                reason,
                f"Failed to create {kind.lower()} "
                f"{obj['metadata']['namespace']}/"
                f"{obj['metadata']['name']}, {exc.message}",
                "raycluster-controller",
            )
            self.blocked.setdefault(rc["metadata"]["namespace"], set()).add(rc["metadata"]["name"])
            return exc.message
        return None

    def _service(self, rc: Obj) -> tuple[Obj | None, str | None]:
        name = rc["metadata"]["name"]
        svcs = [
            s for s in self._owned(rc, "services") if s["metadata"]["name"] == f"{name}-head-svc"
        ]
        if svcs:
            return svcs[0], None
        head = get_path(rc, "spec", "headGroupSpec", default={})
        ports = dict(DEFAULT_PORTS)
        for c in get_path(head, "template", "spec", "containers", default=[])[:1]:
            for p in c.get("ports") or []:
                if p.get("name") and p.get("containerPort"):
                    ports[p["name"]] = int(p["containerPort"])
        svc = {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {
                "name": f"{name}-head-svc",
                "namespace": rc["metadata"]["namespace"],
                "labels": {
                    "ray.io/cluster": name,
                    "ray.io/node-type": "head",
                    "ray.io/identifier": f"{name}-head",
                    "app.kubernetes.io/name": "kuberay",
                    "app.kubernetes.io/created-by": "kuberay-operator",
                },
                "ownerReferences": [owner_ref(rc)],
            },
            "spec": {
                "type": head.get("serviceType") or "ClusterIP",
                "selector": {"ray.io/cluster": name, "ray.io/node-type": "head"},
                "ports": [
                    {"name": n, "port": p, "targetPort": p, "protocol": "TCP"}
                    for n, p in ports.items()
                ],
            },
        }
        err = self._create(rc, svc, "FailedToCreateService")
        return (None if err else svc), err

    # -- the reconcile ---------------------------------------------------------------------

    def _autoscaler_rbac(self, rc: Obj) -> bool:
        """The sidecar's ServiceAccount, Role and RoleBinding (KubeRay's
        ``reconcileAutoscaler*``); False when the head names a service account that does
        not exist, which KubeRay leaves to the user to create (no pods until then)."""
        ns, name = rc["metadata"]["namespace"], rc["metadata"]["name"]
        given = get_path(rc, "spec", "headGroupSpec", "template", "spec", "serviceAccountName")
        for key, obj in sidecar.rbac_objects(rc):
            obj_name = obj["metadata"]["name"]
            if self.cluster.store.get(key, ns, obj_name) is not None:
                continue
            what = {"serviceaccounts": "service account", "roles.rbac.authorization.k8s.io": "role"}
            if key == "serviceaccounts" and given == obj_name:
                self.waiting_sa.setdefault((ns, obj_name), set()).add(name)
                self.cluster.record_event(
                    rc,
                    "Warning",
                    "AutoscalerServiceAccountNotFound",
                    f"Failed to reconcile RayCluster {ns}/{name}. If users specify "
                    "ServiceAccountName for the head Pod, they need to create a ServiceAccount "
                    f"themselves. However, ServiceAccount {obj_name} is not found. Please create "
                    "one. See the PR description of https://github.com/ray-project/kuberay/pull/"
                    "1128 for more details.",
                    "raycluster-controller",
                )
                return False
            label = what.get(key, "role binding")
            try:
                self.cluster.create_object(self.cluster.rt(key), obj)
            except ApiError as exc:
                reason = "FailedToCreate" + label.title().replace(" ", "")
                self.cluster.record_event(
                    rc,
                    "Warning",
                    reason,
                    f"Failed creating {label} {ns}/{obj_name}, {exc.message}",
                    "raycluster-controller",
                )
                return False
            self.cluster.record_event(
                rc,
                "Normal",
                "Created" + label.title().replace(" ", ""),
                f"Created {label} {ns}/{obj_name}",
                "raycluster-controller",
            )
        return True

    def _reconcile_one(self, rc: Obj) -> bool:
        spec = rc.get("spec") or {}
        invalid = sidecar.spec_error(spec)
        if invalid is not None:
            meta = rc["metadata"]
            self.cluster.record_event(
                rc,
                "Warning",
                "InvalidRayClusterSpec",
                f"The RayCluster spec is invalid {meta['namespace']}/{meta['name']}: {invalid}",
                "raycluster-controller",
            )
            return False
        autoscaling = sidecar.enabled(spec)
        if autoscaling and not self._autoscaler_rbac(rc):
            return False
        pods = self._owned(rc, "pods")
        busy = False
        failure: str | None = None
        pods_rt = self.cluster.rt("pods")
        if spec.get("suspend"):
            for pod in pods:
                self.cluster.delete_object(pods_rt, pod)
                busy = True
            pods = []
            svc = next(iter(self._owned(rc, "services")), None)
        else:
            svc, failure = self._service(rc)
            heads = [p for p in pods if p["metadata"]["labels"].get("ray.io/node-type") == "head"]
            if not heads:
                head_t = get_path(spec, "headGroupSpec", "template", default={})
                pod = self._pod(rc, head_t, "head", "headgroup")
                failure = self._create(rc, pod, "FailedCreateHeadPod") or failure
                busy = True
            for extra in sorted(heads, key=lambda p: p["metadata"]["creationTimestamp"])[1:]:
                self.cluster.delete_object(pods_rt, extra)
                busy = True
            for group in spec.get("workerGroupSpecs") or []:
                gname = group.get("groupName", "")
                mine = [
                    p
                    for p in pods
                    if p["metadata"]["labels"].get("ray.io/node-type") == "worker"
                    and p["metadata"]["labels"].get("ray.io/group") == gname
                ]
                doomed = set(get_path(group, "scaleStrategy", "workersToDelete", default=[]))
                for p in [p for p in mine if p["metadata"]["name"] in doomed]:
                    self.cluster.delete_object(pods_rt, p)
                    mine.remove(p)
                    busy = True
                    self.cluster.record_event(
                        rc,
                        "Normal",
                        "DeletedWorkerPod",
                        f"Deleted pod {p['metadata']['namespace']}/{p['metadata']['name']}",
                        "raycluster-controller",
                    )
                want = desired_workers(group)
                # With the autoscaler on, KubeRay deletes no random worker: the autoscaler
                # alone chooses, through workersToDelete.
                surplus = 0 if autoscaling else max(0, len(mine) - want)
                for p in sorted(
                    mine, key=lambda p: p["metadata"]["creationTimestamp"], reverse=True
                )[:surplus]:
                    self.cluster.delete_object(pods_rt, p)
                    busy = True
                for _ in range(want - len(mine)):
                    pod = self._pod(rc, group.get("template") or {}, "worker", gname)
                    err = self._create(rc, pod, "FailedCreateWorkerPod")
                    busy = True
                    if err:
                        failure = err
                        break  # the next ones would be refused the same way
            pods = self._owned(rc, "pods")
        return self._write_status(rc, pods, svc, failure) or busy

    def _desired_resources(self, spec: dict[str, Any]) -> dict[str, str]:
        total: Counter[str] = Counter()
        head_t = get_path(spec, "headGroupSpec", "template", default={})
        req, lim = pod_totals(head_t)
        total.update(req)
        total["nvidia.com/gpu"] += lim.get("nvidia.com/gpu", 0) - req.get("nvidia.com/gpu", 0)
        for group in spec.get("workerGroupSpecs") or []:
            n = desired_workers(group)
            req, lim = pod_totals(group.get("template") or {})
            for k, v in req.items():
                total[k] += v * n
            gpu_extra = lim.get("nvidia.com/gpu", 0) - req.get("nvidia.com/gpu", 0)
            total["nvidia.com/gpu"] += gpu_extra * n
        return {
            "desiredCPU": quantity.format_cpu(total["cpu"]),
            "desiredMemory": quantity.format_memory(total["memory"]),
            "desiredGPU": str(total["nvidia.com/gpu"]),
            "desiredTPU": str(total["google.com/tpu"]),
        }

    # Named exception to ruff's C901 (max-complexity 12): KubeRay's status fields, one branch per
    # field as the operator fills them.
    def _write_status(self, rc: Obj, pods: list[Obj], svc: Obj | None, failure: str | None) -> bool:  # noqa: C901
        spec = rc.get("spec") or {}
        old = rc.get("status") or {}
        stamp = now()
        suspended = bool(spec.get("suspend"))
        heads = [p for p in pods if p["metadata"]["labels"].get("ray.io/node-type") == "head"]
        workers = [p for p in pods if p["metadata"]["labels"].get("ray.io/node-type") == "worker"]
        head = heads[0] if heads else None
        head_ready = head is not None and _is_ready(head)
        ready_workers = sum(1 for p in workers if _is_ready(p))
        groups = spec.get("workerGroupSpecs") or []
        desired = sum(desired_workers(g) for g in groups)
        all_ready = head_ready and ready_workers >= desired and len(workers) == desired
        old_conds = {c["type"]: c for c in old.get("conditions") or []}
        was_provisioned = get_path(old_conds, "RayClusterProvisioned", "status") == "True"

        def cond(ctype: str, status: bool, reason: str, message: str = "") -> dict[str, Any]:
            prev = old_conds.get(ctype)
            text = "True" if status else "False"
            when = prev["lastTransitionTime"] if prev and prev.get("status") == text else stamp
            return {
                "type": ctype,
                "status": text,
                "reason": reason,
                "message": message,
                "lastTransitionTime": when,
            }

        conds = []
        if suspended:
            conds.append(cond("HeadPodReady", False, "HeadPodNotFound", "Head Pod not found"))
            conds.append(
                cond(
                    "RayClusterProvisioned",
                    False,
                    "RayClusterPodsProvisioning",
                    "RayCluster Pods are being provisioned for first time",
                )
            )
            conds.append(cond("RayClusterSuspending", False, "RayClusterSuspending"))
            conds.append(cond("RayClusterSuspended", True, "RayClusterSuspended"))
        else:
            conds.append(
                cond(
                    "HeadPodReady",
                    head_ready,
                    "HeadPodRunningAndReady"
                    if head_ready
                    else ("HeadPodNotFound" if head is None else "HeadPodNotReady"),
                    ""
                    if head_ready
                    else ("Head Pod not found" if head is None else "Head Pod is not ready"),
                )
            )
            provisioned = all_ready or (was_provisioned and old.get("state") != "suspended")
            conds.append(
                cond(
                    "RayClusterProvisioned",
                    provisioned,
                    "AllPodRunningAndReadyFirstTime"
                    if provisioned
                    else "RayClusterPodsProvisioning",
                    "All Ray Pods are ready for the first time"
                    if provisioned
                    else "RayCluster Pods are being provisioned for first time",
                )
            )
            if "RayClusterSuspended" in old_conds:
                conds.append(cond("RayClusterSuspended", False, "RayClusterSuspended"))
            if failure:
                conds.append(cond("ReplicaFailure", True, "FailedCreatePod", failure))
        status: dict[str, Any] = {
            "readyWorkerReplicas": 0 if suspended else ready_workers,
            "availableWorkerReplicas": 0 if suspended else ready_workers,
            "desiredWorkerReplicas": desired,
            "minWorkerReplicas": sum(
                int(g.get("minReplicas") or 0) * max(1, int(g.get("numOfHosts") or 1))
                for g in groups
            ),
            "maxWorkerReplicas": sum(
                int(g.get("maxReplicas") or 0) * max(1, int(g.get("numOfHosts") or 1))
                for g in groups
            ),
            **self._desired_resources(spec),
            "observedGeneration": rc["metadata"].get("generation", 1),
            "conditions": conds,
        }
        if svc is not None:
            status["endpoints"] = {
                p["name"]: str(p["port"]) for p in svc["spec"].get("ports") or [] if p.get("name")
            }
        head_status: dict[str, str] = {}
        if svc is not None:
            head_status["serviceName"] = svc["metadata"]["name"]
            if svc["spec"].get("clusterIP"):
                head_status["serviceIP"] = svc["spec"]["clusterIP"]
        if head is not None and not suspended:
            head_status["podName"] = head["metadata"]["name"]
            if head.get("status", {}).get("podIP"):
                head_status["podIP"] = head["status"]["podIP"]
        if head_status:
            status["head"] = head_status
        if suspended:
            status["state"] = "suspended"
        elif all_ready or (old.get("state") == "ready"):
            status["state"] = "ready"
        if failure:
            status["reason"] = failure
        times = dict(old.get("stateTransitionTimes") or {})
        if status.get("state") and status.get("state") != old.get("state"):
            times[status["state"]] = stamp
        if times:
            status["stateTransitionTimes"] = times
        comparable = {k: v for k, v in old.items() if k != "lastUpdateTime"}
        if comparable == status:
            return False
        status["lastUpdateTime"] = stamp
        rc["status"] = status
        self.cluster.update_object(self.cluster.rt(KEY), rc)
        return True
