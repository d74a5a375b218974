"""DRA in the running cluster: the driver's publishing, the resourceclaim controller, the
scheduler's allocate-and-reserve and what the kubelet hands each container.

A pod's ``spec.resourceClaims`` name a claim or a template; a template's claim is created
for the pod (``<pod>-<claim>-<5 chars>``, owned by it, annotated
``resource.kubernetes.io/pod-claim-name``, listed in ``status.resourceClaimStatuses``) and
deleted when the pod is gone or done, whose reservation is then dropped and, with no
consumer left, the allocation too. The scheduler asks :meth:`Dra.why_not` per node and
:meth:`Dra.commit` on bind, which writes ``status.allocation``, ``status.reservedFor`` and
``status.devices``.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from kubesim.dra import driver
from kubesim.dra.allocator import CLAIMS, CLASSES, SLICES, Inventory
from kubesim.resources import ResourceType
from kubesim.store import Obj
from kubesim.util import suffix

TEMPLATES = "resourceclaimtemplates.resource.k8s.io"
POD_CLAIM_NAME = "resource.kubernetes.io/pod-claim-name"
VISIBLE = "kubesim.io/nvidia-visible-devices"
CDI = "kubesim.io/cdi-devices"
CANNOT = "cannot allocate all claims"
PodKey = tuple[str, str]


def pod_claims(pod: Obj) -> list[dict[str, Any]]:
    """The pod's ``spec.resourceClaims``."""
    return list((pod.get("spec") or {}).get("resourceClaims") or [])


class Dra:
    """The DRA controllers of the simulated cluster (see the module docstring)."""

    def __init__(self, cluster: Any) -> None:
        # The cluster (a kubesim.controller.ClusterView), untyped: kubesim.validation
        # imports this package's validation, and kubesim.controller imports validation,
        # so naming ClusterView here would close an import cycle.
        self.cluster = cluster
        self.reset()

    def reset(self) -> None:
        """Forget all bookkeeping (the store was wiped)."""
        self.installed = False
        self.nodes: set[str] = set()  # nodes whose slice is to be (re)published
        self.gone: set[str] = set()  # nodes whose slice is to be withdrawn
        self.new_pods: set[PodKey] = set()
        self.done_pods: dict[PodKey, Obj] = {}
        self.plans: dict[tuple[PodKey, str], list[tuple[Obj, list[dict[str, Any]]]] | None] = {}

    def on_change(self, rt: ResourceType, old: Obj | None, new: Obj | None) -> None:
        """Nodes (re)publish their slice; pods get their claims made and released."""
        if rt.kind == "Node":
            name = (new or old or {})["metadata"]["name"]
            (self.nodes if new is not None else self.gone).add(name)
        elif rt.kind == "Pod":
            ref = new if new is not None else old
            assert ref is not None
            if not pod_claims(ref):
                return
            key = (ref["metadata"]["namespace"], ref["metadata"]["name"])
            if new is None or (new.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                self.done_pods[key] = ref
            elif old is None:
                self.new_pods.add(key)
        elif rt.kind in ("ResourceSlice", "ResourceClaim", "DeviceClass"):
            self.plans.clear()

    def reconcile(self) -> bool:
        """Install the classes, publish slices, create and release claims."""
        busy = False
        if not self.installed:
            self.installed = True
            for cls in driver.device_classes():
                if self.cluster.store.get(CLASSES, "", cls["metadata"]["name"]) is None:
                    self.cluster.create_object(self.cluster.rt(CLASSES), cls, admit=False)
                    busy = True
        busy = self._publish() or busy
        while self.new_pods:
            key = self.new_pods.pop()
            pod = self.cluster.store.get("pods", *key)
            if pod is not None:
                busy = self._make_claims(pod) or busy
        while self.done_pods:
            _, pod = self.done_pods.popitem()
            busy = self._release(pod) or busy
        return busy

    # -- the driver's kubelet plugin ------------------------------------------------------

    def _pool(self, node: Obj) -> dict[str, Any] | None:
        name = (node["metadata"].get("labels") or {}).get("kubesim.io/pool")
        return next(
            (p for p in self.cluster.fleet.get("pools") or [] if p.get("name") == name), None
        )

    def _publish(self) -> bool:
        busy = False
        rt = self.cluster.rt(SLICES)
        for name in sorted(self.gone - self.nodes):
            for sl in list(self.cluster.store.iter(SLICES)):
                if (sl.get("spec") or {}).get("nodeName") == name:
                    self.cluster.remove_object(rt, sl)
                    busy = True
        self.gone.clear()
        for name in sorted(self.nodes):
            node = self.cluster.store.get("nodes", "", name)
            want = driver.node_slice(node, self._pool(node)) if node is not None else None
            have = self.cluster.store.get(SLICES, "", f"{name}-{driver.DRIVER}-slice")
            if want is None or (have is not None and have["spec"] == want["spec"]):
                continue
            if have is not None:
                self.cluster.remove_object(rt, have)
            self.cluster.create_object(rt, want, admit=False)
            busy = True
        self.nodes.clear()
        return busy

    # -- the resourceclaim controller -----------------------------------------------------

    def claim_name(self, pod: Obj, pc: dict[str, Any]) -> str | None:
        """The ResourceClaim a pod claim stands for (None: its claim is not made yet)."""
        if pc.get("resourceClaimName"):
            return str(pc["resourceClaimName"])
        for st in (pod.get("status") or {}).get("resourceClaimStatuses") or []:
            if st.get("name") == pc.get("name"):
                return st.get("resourceClaimName")
        return None

    def _make_claims(self, pod: Obj) -> bool:
        ns, statuses = pod["metadata"]["namespace"], []
        for pc in pod_claims(pod):
            tname = pc.get("resourceClaimTemplateName")
            if not tname or self.claim_name(pod, pc):
                continue
            template = self.cluster.store.get(TEMPLATES, ns, tname)
            if template is None:
                continue  # the pod waits, as the controller retries until the template exists
            tmeta = (template.get("spec") or {}).get("metadata") or {}
            base = f"{pod['metadata']['name']}-{pc['name']}"[:57]
            claim = {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {
                    "name": f"{base}-{suffix()}",
                    "namespace": ns,
                    "labels": dict(tmeta.get("labels") or {}),
                    "annotations": {**(tmeta.get("annotations") or {}), POD_CLAIM_NAME: pc["name"]},
                    "ownerReferences": [
                        {
                            "apiVersion": "v1",
                            "kind": "Pod",
                            "name": pod["metadata"]["name"],
                            "uid": pod["metadata"]["uid"],
                            "controller": True,
                            "blockOwnerDeletion": True,
                        }
                    ],
                },
                "spec": copy.deepcopy((template.get("spec") or {}).get("spec") or {}),
            }
            made = self.cluster.create_object(self.cluster.rt(CLAIMS), claim, admit=False)
            statuses.append({"name": pc["name"], "resourceClaimName": made["metadata"]["name"]})
        if not statuses:
            return False
        status = pod.setdefault("status", {})
        status["resourceClaimStatuses"] = (status.get("resourceClaimStatuses") or []) + statuses
        self.cluster.update_object(self.cluster.rt("pods"), pod)
        return True

    def _release(self, pod: Obj) -> bool:
        busy, ns, uid = False, pod["metadata"]["namespace"], pod["metadata"]["uid"]
        rt = self.cluster.rt(CLAIMS)
        for pc in pod_claims(pod):
            name = self.claim_name(pod, pc)
            claim = self.cluster.store.get(CLAIMS, ns, name) if name else None
            if claim is None:
                continue
            owned = any(o.get("uid") == uid for o in claim["metadata"].get("ownerReferences") or [])
            if owned:
                self.cluster.delete_object(rt, claim)
                busy = True
                continue
            status = claim.get("status") or {}
            reserved = [r for r in status.get("reservedFor") or [] if r.get("uid") != uid]
            if reserved != (status.get("reservedFor") or []):
                status["reservedFor"] = reserved
                if not reserved:
                    status.pop("allocation", None)
                    status.pop("devices", None)
                claim["status"] = {k: v for k, v in status.items() if v}
                self.cluster.update_object(rt, claim)
                busy = True
        return busy

    # -- the scheduler's DynamicResources plugin -------------------------------------------

    def prefilter(self, pod: Obj) -> str | None:
        """Why no node can be tried yet (a claim missing), or None."""
        ns = pod["metadata"]["namespace"]
        for pc in pod_claims(pod):
            name = self.claim_name(pod, pc)
            if name is None:
                return (
                    f'waiting for resource claim template "{pc.get("resourceClaimTemplateName")}"'
                )
            if self.cluster.store.get(CLAIMS, ns, name) is None:
                return f'resourceclaim.resource.k8s.io "{name}" not found'
        return None

    def why_not(self, key: PodKey, node: str) -> list[str]:
        """``[]`` when the pod's claims can be allocated on ``node``, else the reason."""
        if (key, node) not in self.plans:
            self.plans[(key, node)] = self._plan(key, node)
        return [] if self.plans[(key, node)] is not None else [CANNOT]

    def _plan(self, key: PodKey, node: str) -> list[tuple[Obj, list[dict[str, Any]]]] | None:
        pod = self.cluster.store.get("pods", *key)
        if pod is None:
            return None
        claims, todo = [], []
        for pc in pod_claims(pod):
            claim = self.cluster.store.get(CLAIMS, key[0], self.claim_name(pod, pc) or "")
            if claim is None:
                return None
            alloc = (claim.get("status") or {}).get("allocation")
            if alloc is None:
                todo.append(claim)
            elif not _on_node(alloc, node):
                return None
            claims.append(claim)
        results = Inventory(self.cluster.store, node).allocate(todo)
        if results is None:
            return None
        return list(zip(todo, results, strict=True)) + [(c, []) for c in claims if c not in todo]

    def commit(self, pod: Obj, node: str) -> None:
        """Allocate and reserve the pod's claims on ``node`` and hand its containers the
        devices (the scheduler binds it next)."""
        key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
        plan = self.plans.get((key, node)) or self._plan(key, node) or []
        self.plans.clear()
        ref = {"resource": "pods", "name": key[1], "uid": pod["metadata"]["uid"]}
        rt = self.cluster.rt(CLAIMS)
        devices_of: dict[str, list[dict[str, Any]]] = {}
        for claim, results in plan:
            claim = copy.deepcopy(claim)
            status = claim.setdefault("status", {})
            if results:
                status["allocation"] = {
                    "devices": {"results": results},
                    "nodeSelector": _node_selector(node),
                }
                status["devices"] = [
                    {k: r[k] for k in ("driver", "pool", "device")} for r in results
                ]
            reserved = status.setdefault("reservedFor", [])
            if all(r.get("uid") != ref["uid"] for r in reserved):
                reserved.append(ref)
            self.cluster.update_object(rt, claim)
            devices_of[claim["metadata"]["name"]] = status["allocation"]["devices"]["results"]
        self._hand_over(pod, node, devices_of)

    def _hand_over(self, pod: Obj, node: str, devices_of: dict[str, list[dict[str, Any]]]) -> None:
        """What the driver's NodePrepareResources gives each container: its claims' device
        UUIDs as NVIDIA_VISIBLE_DEVICES (``void`` for a container with no claim) and the
        per-claim CDI device ids ``k8s.gpu.nvidia.com/claim=<claim uid>-<device>``."""
        inv = Inventory(self.cluster.store, node)
        ns = pod["metadata"]["namespace"]
        visible: dict[str, str] = {}
        cdi: dict[str, list[str]] = {}
        spec = pod.get("spec") or {}
        # Init containers too: one that shares the pod's claim gets the same devices.
        for c in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
            uuids, ids = [], []
            for ref in (c.get("resources") or {}).get("claims") or []:
                pc = next((p for p in pod_claims(pod) if p.get("name") == ref.get("name")), None)
                cname = self.claim_name(pod, pc) if pc else None
                claim = self.cluster.store.get(CLAIMS, ns, cname or "")
                for r in devices_of.get(cname or "", []):
                    if ref.get("request") and r["request"].split("/")[0] != ref["request"]:
                        continue
                    dev = inv.by_id.get((r["driver"], r["pool"], r["device"])) or {}
                    uuids.append(
                        ((dev.get("attributes") or {}).get("uuid") or {}).get("string", "")
                    )
                    uid = (claim or {}).get("metadata", {}).get("uid", "")
                    ids.append(f"k8s.gpu.nvidia.com/claim={uid}-{r['device']}")
            visible[c["name"]] = ",".join(u for u in uuids if u) or "void"
            if ids:
                cdi[c["name"]] = ids
        ann = pod["metadata"].setdefault("annotations", {})
        ann[VISIBLE] = json.dumps(visible, sort_keys=True)
        if cdi:
            ann[CDI] = json.dumps(cdi, sort_keys=True)

    def available_counters(self, node: str) -> dict[str, dict[str, int]]:
        """What is left of each shared counter set of ``node``'s GPUs, by counter set."""
        return {
            k[2]: v for k, v in Inventory(self.cluster.store, node).available_counters().items()
        }


def _on_node(alloc: dict[str, Any], node: str) -> bool:
    for term in (alloc.get("nodeSelector") or {}).get("nodeSelectorTerms") or []:
        for f in term.get("matchFields") or []:
            if f.get("key") == "metadata.name" and node not in (f.get("values") or []):
                return False
    return True


def _node_selector(node: str) -> dict[str, Any]:
    field = {"key": "metadata.name", "operator": "In", "values": [node]}
    return {"nodeSelectorTerms": [{"matchFields": [field]}]}
