"""The simulated cluster: API semantics over the store, and the controllers that react.

Every API verb lands here with the lock held. A write goes through metadata bookkeeping
(uid, resourceVersion, generation, timestamps), admission (validation, LimitRange defaults,
ResourceQuota) and the store; then the controllers (KubeRay, Kueue, scheduler, quota status,
kubelet) run until nothing is left to do, so that a caller sees a settled cluster as soon as
its write returns.
"""

from __future__ import annotations

import copy
import threading
import time
import uuid
from typing import Any, Protocol

from kubesim import errors
from kubesim.admission import Quota
from kubesim.defaults import default_namespace, default_pod, default_service
from kubesim.errors import ApiError
from kubesim.fleet import build_nodes, load_fleet, node_conditions
from kubesim.kubelet import Kubelet
from kubesim.operators.kuberay import KubeRay
from kubesim.operators.kueue import Kueue
from kubesim.patch import apply_merge, json_patch, merge_patch, strategic_merge_patch
from kubesim.resources import Registry, ResourceType
from kubesim.scheduler import Scheduler
from kubesim.store import Obj, SelectorError, Store
from kubesim.util import ip_from_index, now, now_micro, suffix
from kubesim.validation import (
    Validator,
    drop_nulls,
    validate_builtin,
    validate_metadata,
    validate_pod_update,
)

CRD_KEY = "customresourcedefinitions.apiextensions.k8s.io"
SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


class Controller(Protocol):
    """What the cluster asks of each emulated controller."""

    def on_change(self, rt: ResourceType, old: Obj | None, new: Obj | None) -> None:
        """Note a write (``old`` None on create, ``new`` None on delete)."""

    def reconcile(self) -> bool:
        """Do pending work; True when anything was written."""


class Cluster:
    """State and API semantics of one simulated cluster."""

    def __init__(
        self,
        fleet: str | dict[str, Any] | None = None,
        startup_delay: float = 0.0,
        kueue: bool = False,
        kai: bool = False,
    ) -> None:
        self.lock = threading.RLock()
        self.registry = Registry.shared()
        self.validator = Validator()
        self.store = Store()
        self.fleet = load_fleet(fleet)
        self.startup_delay = startup_delay
        self.kai_enabled = kai
        self.kueue_enabled = kueue
        self.ip_counter = 0
        self.svc_counter = 0
        self.events_index: dict[tuple[str, str], tuple[str, str]] = {}
        self.warnings: list[str] = []
        self.quota = Quota(self)
        self.kubelet = Kubelet(self)
        self.scheduler = Scheduler(self)
        self.kuberay = KubeRay(self)
        self.kueue = Kueue(self)
        # The kubelet follows the scheduler: pods bound in a pass start in the same pass.
        self.controllers: list[Controller] = [
            self.kueue,
            self.kuberay,
            self.scheduler,
            self.kubelet,
            self.quota,
        ]
        self.foreground: set[tuple[str, str, str]] = set()
        self.bootstrap()

    # -- bootstrap ---------------------------------------------------------------------

    def rt(self, key: str) -> ResourceType:
        """Resource type by storage key."""
        return self.registry.by_key(key)

    def bootstrap(self) -> None:
        """Create system namespaces, nodes from the fleet and the CRD objects."""
        with self.lock:
            for ns in SYSTEM_NAMESPACES:
                if self.store.get("namespaces", "", ns) is None:
                    self.create_object(
                        self.rt("namespaces"),
                        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
                    )
            self.rebuild_nodes()
            self.install_crds()
            self.settle()

    def install_crds(self) -> None:
        """Serve the CRD objects (read-only) under apiextensions.k8s.io."""
        crd_rt = self.rt(CRD_KEY)
        for rt in self.registry.types:
            if (
                rt.crd is not None
                and self.store.get(CRD_KEY, "", rt.crd["metadata"]["name"]) is None
            ):
                # The spec is shared with the registry and never written: no deep copy.
                obj = {
                    **rt.crd,
                    "metadata": dict(rt.crd["metadata"]),
                    "status": {
                        "acceptedNames": rt.crd["spec"]["names"],
                        "storedVersions": [rt.storage_version],
                        "conditions": [
                            {
                                "type": "Established",
                                "status": "True",
                                "reason": "InitialNamesAccepted",
                            }
                        ],
                    },
                }
                self.create_object(crd_rt, obj, admit=False)

    def rebuild_nodes(self) -> None:
        """Replace every Node with the fleet's."""
        rt = self.rt("nodes")
        for node in list(self.store.iter("nodes")):
            self.remove_object(rt, node)
        stamp = now()
        for node in build_nodes(self.fleet):
            node["status"]["conditions"] = node_conditions(stamp)
            self.create_object(rt, node, admit=False)

    def wipe(self) -> None:
        """Forget every object but nodes (rebuilt from the fleet); a fresh cluster."""
        with self.lock:
            self.store.__init__()  # type: ignore[misc]
            self.events_index.clear()
            self.foreground.clear()
            self.scheduler.reset()
            self.kubelet.reset()
            self.quota.reset()
            self.kuberay.reset()
            self.kueue.reset()
            self.bootstrap()

    def restore(self, data: dict[str, Any]) -> None:
        """Load a snapshot and rebuild every controller's bookkeeping from the objects."""
        with self.lock:
            self.store.load(data)
            self.install_crds()
            counters = data.get("counters") or {}
            self.ip_counter = int(counters.get("ip", 0))
            self.svc_counter = int(counters.get("svc", 0))
            self.events_index.clear()
            self.foreground.clear()
            for c in (self.scheduler, self.kubelet, self.quota, self.kuberay, self.kueue):
                c.reset()
            for ev in self.store.iter("events"):
                inv = ev.get("involvedObject") or {}
                self.events_index[(inv.get("uid", ""), ev.get("reason", ""))] = (
                    ev["metadata"]["namespace"],
                    ev["metadata"]["name"],
                )
            # Replay every object as a create so controllers rebuild their indexes
            # (nodes before pods: the registry lists them first).
            for rt in self.registry.types:
                for obj in list(self.store.iter(rt.key)):
                    self._notify(rt, None, obj)
            self.settle()

    # -- helpers -------------------------------------------------------------------------

    def out(self, rt: ResourceType, version: str, obj: Obj) -> Obj:
        """The object as served at ``version`` (only apiVersion differs between versions)."""
        api_version = rt.api_version(version)
        if obj.get("apiVersion") == api_version:
            return obj
        return {**obj, "apiVersion": api_version}

    def next_pod_ip(self) -> str:
        """A fresh pod IP from 10.244.0.0/16."""
        self.ip_counter += 1
        return ip_from_index("10.244", self.ip_counter)

    def next_service_ip(self) -> str:
        """A fresh ClusterIP from 10.96.0.0/16."""
        self.svc_counter += 1
        return ip_from_index("10.96", self.svc_counter)

    def _check_namespace(self, rt: ResourceType, ns: str, name: str) -> None:
        if not rt.namespaced:
            return
        nso = self.store.get("namespaces", "", ns)
        if nso is None:
            raise errors.not_found("namespaces", "", ns)
        if nso["metadata"].get("deletionTimestamp"):
            raise errors.forbidden(
                rt.plural,
                rt.group,
                name,
                f"unable to create new content in namespace {ns} because it is being terminated",
            )

    def _notify(self, rt: ResourceType, old: Obj | None, new: Obj | None) -> None:
        for c in self.controllers:
            c.on_change(rt, old, new)

    def settle(self) -> None:
        """Run the controllers until none has anything left to do."""
        for _ in range(100):
            busy = False
            for c in self.controllers:
                busy = c.reconcile() or busy
            busy = self._finish_foreground() or busy
            if not busy:
                return

    # -- internal writes (used by the API verbs and by the controllers) -----------------

    def create_object(
        self, rt: ResourceType, obj: Obj, admit: bool = True, dry_run: bool = False
    ) -> Obj:
        """Create with full metadata bookkeeping; ``admit`` runs quota and LimitRange."""
        meta = obj.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + suffix()
        obj["apiVersion"] = rt.api_version()
        obj["kind"] = rt.kind
        if rt.namespaced:
            meta["namespace"] = meta.get("namespace") or "default"
        else:
            meta.pop("namespace", None)
        ns, name = meta.get("namespace", ""), meta.get("name", "")
        if admit:
            validate_metadata(rt, obj)
            self._check_namespace(rt, ns, name)
        if self.store.get(rt.key, ns, name) is not None:
            raise errors.already_exists(rt.plural, rt.group, name)
        for k in ("deletionTimestamp", "deletionGracePeriodSeconds", "managedFields", "selfLink"):
            meta.pop(k, None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now()
        meta["generation"] = 1
        if rt.kind == "Pod":
            default_pod(obj)
            if admit:
                self.quota.apply_limit_ranges(obj)
        elif rt.kind == "Service":
            default_service(obj, self)
        elif rt.kind == "Namespace":
            default_namespace(obj)
        if rt.is_custom:
            self.kueue.mutate(rt, obj)
        if admit and rt.kind not in ("Event",):
            self.quota.admit(rt, obj, None)
        if dry_run:
            return obj
        meta["resourceVersion"] = self.store.next_rv()
        self.store.put(rt.key, obj)
        self._notify(rt, None, obj)
        return obj

    def update_object(self, rt: ResourceType, obj: Obj, old: Obj | None = None) -> Obj:
        """Store a changed object: new resourceVersion, observers told. ``old`` is the
        previous stored object when the caller built ``obj`` as a copy."""
        obj["metadata"]["resourceVersion"] = self.store.next_rv()
        meta = obj["metadata"]
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            self.remove_object(rt, obj)
            return obj
        self.store.put(rt.key, obj)
        self._notify(rt, old if old is not None else obj, obj)
        return obj

    def remove_object(self, rt: ResourceType, obj: Obj) -> None:
        """Drop an object from the store (no cascade, no finalizers)."""
        meta = obj["metadata"]
        gone = self.store.remove(rt.key, meta.get("namespace", ""), meta["name"])
        if gone is not None:
            self._notify(rt, gone, None)

    def delete_object(self, rt: ResourceType, obj: Obj, propagation: str = "Background") -> Obj:
        """Delete honouring finalizers and cascading to dependents (see README)."""
        meta = obj["metadata"]
        uid = meta["uid"]
        if rt.kind == "Namespace":
            return self._delete_namespace(obj)
        if propagation == "Orphan":
            for ref in self.store.dependents(uid):
                dep = self.store.get(*ref)
                if dep is not None:
                    dep["metadata"]["ownerReferences"] = [
                        o for o in dep["metadata"].get("ownerReferences", []) if o.get("uid") != uid
                    ]
                    self.update_object(self.rt(ref[0]), dep)
        else:
            self._cascade(uid, propagation)
        finalizers = list(meta.get("finalizers") or [])
        if propagation == "Foreground" and self.store.dependents(uid):
            if "foregroundDeletion" not in finalizers:
                finalizers.append("foregroundDeletion")
            self.foreground.add((rt.key, meta.get("namespace", ""), meta["name"]))
        if finalizers:
            if not meta.get("deletionTimestamp"):
                meta["deletionTimestamp"] = now()
                meta["deletionGracePeriodSeconds"] = 0
            meta["finalizers"] = finalizers
            self.update_object(rt, obj)
            return obj
        self.remove_object(rt, obj)
        return obj

    def _cascade(self, uid: str, propagation: str) -> None:
        for ref in self.store.dependents(uid):
            dep = self.store.get(*ref)
            if dep is None:
                continue
            owners = [
                o
                for o in dep["metadata"].get("ownerReferences", [])
                if o.get("uid") != uid and o.get("uid") in self.store.by_uid
            ]
            if owners:
                # Another live owner keeps it; only drop the reference to the deleted one.
                dep["metadata"]["ownerReferences"] = owners
                self.update_object(self.rt(ref[0]), dep)
                continue
            self.delete_object(self.rt(ref[0]), dep, propagation)

    def _finish_foreground(self) -> bool:
        done = False
        for key, ns, name in list(self.foreground):
            obj = self.store.get(key, ns, name)
            if obj is None:
                self.foreground.discard((key, ns, name))
                continue
            if self.store.dependents(obj["metadata"]["uid"]):
                continue
            self.foreground.discard((key, ns, name))
            obj["metadata"]["finalizers"] = [
                f for f in obj["metadata"].get("finalizers", []) if f != "foregroundDeletion"
            ]
            self.update_object(self.rt(key), obj)
            done = True
        for nso in list(self.store.iter("namespaces")):
            if nso["metadata"].get("deletionTimestamp"):
                done = self._try_finish_namespace(nso) or done
        return done

    def _delete_namespace(self, nso: Obj) -> Obj:
        meta = nso["metadata"]
        if not meta.get("deletionTimestamp"):
            meta["deletionTimestamp"] = now()
            meta["deletionGracePeriodSeconds"] = 0
            nso["status"] = {"phase": "Terminating"}
            self.update_object(self.rt("namespaces"), nso)
        ns = meta["name"]
        for rt in self.registry.types:
            if not rt.namespaced:
                continue
            for obj in list(self.store.iter(rt.key, ns)):
                if not obj["metadata"].get("deletionTimestamp"):
                    self.delete_object(rt, obj, "Background")
        self._try_finish_namespace(nso)
        return nso

    def _try_finish_namespace(self, nso: Obj) -> bool:
        ns = nso["metadata"]["name"]
        for rt in self.registry.types:
            if rt.namespaced and self.store.count(rt.key, ns):
                return False
        if nso["metadata"].get("finalizers"):
            return False
        self.remove_object(self.rt("namespaces"), nso)
        return True

    def record_event(
        self, involved: Obj, etype: str, reason: str, message: str, component: str, host: str = ""
    ) -> None:
        """Write an Event about ``involved``, bumping ``count`` of a repeat (same reason)."""
        meta = involved["metadata"]
        ns = meta.get("namespace") or "default"
        key = (meta["uid"], reason)
        stamp = now()
        found = self.events_index.get(key)
        ev = self.store.get("events", *found) if found else None
        rt = self.rt("events")
        if ev is not None:
            ev["count"] = int(ev.get("count", 1)) + 1
            ev["message"] = message
            ev["lastTimestamp"] = stamp
            self.update_object(rt, ev)
            return
        name = f"{meta['name']}.{uuid.uuid4().hex[:16]}"
        source: dict[str, str] = {"component": component}
        if host:
            source["host"] = host
        ev = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": ns},
            "involvedObject": {
                "kind": involved["kind"],
                "apiVersion": involved["apiVersion"],
                "name": meta["name"],
                "namespace": meta.get("namespace", ""),
                "uid": meta["uid"],
                "resourceVersion": meta.get("resourceVersion", ""),
            },
            "reason": reason,
            "message": message,
            "type": etype,
            "count": 1,
            "source": source,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "eventTime": None,
            "reportingComponent": component,
            "reportingInstance": host or component,
        }
        if not meta.get("namespace") and involved.get("kind") != "Namespace":
            ev["involvedObject"].pop("namespace")
        if self.store.get("namespaces", "", ns) is None:
            return
        self.create_object(rt, ev, admit=False)
        self.events_index[key] = (ns, name)

    def tick(self) -> None:
        """Time-driven work (pod start-up after the delay, Kueue's requeue backoff), then
        settle."""
        with self.lock:
            started = self.kubelet.start_due_pods(time.monotonic())
            if self.kueue.requeue_due() or started:
                self.settle()

    # -- verbs -------------------------------------------------------------------------

    def _find(self, rt: ResourceType, ns: str, name: str) -> Obj:
        obj = self.store.get(rt.key, ns if rt.namespaced else "", name)
        if obj is None:
            raise errors.not_found(rt.plural, rt.group, name)
        return obj

    def _prepare(self, rt: ResourceType, version: str, body: Any, strict: bool) -> Obj:
        if not isinstance(body, dict):
            raise errors.bad_request("the body of the request must be a JSON/YAML object")
        if body.get("kind") not in (None, rt.kind):
            # A Secret sent to the configmaps collection is refused, not stored as a ConfigMap.
            raise errors.bad_request(
                f"the object provided is unrecognized (must be of type {rt.kind}): "
                f"the body is a {body['kind']}"
            )
        if rt.is_custom:
            body, pruned = self.validator.prepare_custom(rt, version, body, strict)
            if pruned:
                self.warnings.append("; ".join(f'unknown field "{p}"' for p in pruned))
        else:
            body = drop_nulls(body)
            validate_builtin(rt, body)
        return body

    def api_create(
        self, rt: ResourceType, version: str, ns: str, body: Any, params: dict[str, str]
    ) -> Obj:
        """POST to a collection."""
        if "create" not in rt.verbs:
            raise errors.method_not_allowed()
        strict = params.get("fieldValidation", "") == "Strict"
        obj = self._prepare(rt, version, body, strict)
        meta = obj.setdefault("metadata", {})
        if rt.namespaced:
            if meta.get("namespace") and meta["namespace"] != ns:
                raise errors.bad_request(
                    "the namespace of the provided object does not match "
                    "the namespace sent on the request"
                )
            meta["namespace"] = ns
        if rt.kind in ("Pod", "Node") and "status" in obj and rt.kind == "Pod":
            obj.pop("status")
        self.kueue.validate(rt, obj)
        created = self.create_object(rt, obj, dry_run=bool(params.get("dryRun")))
        if not params.get("dryRun"):
            self.settle()
        return self.out(rt, version, created)

    def api_get(self, rt: ResourceType, version: str, ns: str, name: str) -> Obj:
        """GET one object (or its /status)."""
        return self.out(rt, version, self._find(rt, ns, name))

    def api_list(
        self, rt: ResourceType, version: str, ns: str | None, params: dict[str, str]
    ) -> Obj:
        """GET a collection with selectors and pagination."""
        try:
            limit = int(params.get("limit") or 0)
            items, token = self.store.select(
                rt.key,
                ns if rt.namespaced else None,
                params.get("labelSelector"),
                params.get("fieldSelector"),
                limit,
                params.get("continue") or None,
            )
        except SelectorError as exc:
            raise errors.bad_request(str(exc)) from exc
        except ValueError as exc:
            raise errors.ApiError(
                410,
                "Expired",
                "The provided continue parameter is too old to display a consistent list result.",
            ) from exc
        meta: dict[str, Any] = {"resourceVersion": str(self.store.rv)}
        if token:
            meta["continue"] = token
        return {
            "kind": rt.list_kind,
            "apiVersion": rt.api_version(version),
            "metadata": meta,
            "items": [self.out(rt, version, o) for o in items],
        }

    def _write_update(
        self,
        rt: ResourceType,
        version: str,
        old: Obj,
        new: Obj,
        subresource: str,
        params: dict[str, str],
    ) -> Obj:
        """Shared tail of PUT and PATCH: checks, generation, store, settle."""
        strict = params.get("fieldValidation", "") == "Strict"
        meta, ometa = new.setdefault("metadata", {}), old["metadata"]
        if meta.get("name", ometa["name"]) != ometa["name"]:
            raise errors.bad_request(
                f"the name of the object ({meta.get('name')}) does not "
                f"match the name on the URL ({ometa['name']})"
            )
        rv = meta.get("resourceVersion")
        if rv and rv != ometa["resourceVersion"]:
            raise errors.conflict(rt.plural, rt.group, ometa["name"])
        new = self._prepare(rt, version, new, strict)
        meta = new["metadata"]
        if subresource == "status":
            # Only the status moves through /status; the rest of the object is kept.
            merged = copy.deepcopy(old)
            merged["status"] = new.get("status")
            new = drop_nulls(merged)
        elif rt.status_subresource and rt.kind not in ("Namespace",):
            if "status" in old:
                new["status"] = copy.deepcopy(old["status"])
            else:
                new.pop("status", None)
        validate_metadata(rt, new)
        for k in (
            "uid",
            "creationTimestamp",
            "namespace",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
        ):
            if k in ometa:
                meta[k] = ometa[k]
            else:
                meta.pop(k, None)
        meta.pop("managedFields", None)
        new["apiVersion"], new["kind"] = rt.api_version(), rt.kind
        if subresource != "status":
            changed = {k: v for k, v in new.items() if k not in ("metadata", "status")} != {
                k: v for k, v in old.items() if k not in ("metadata", "status")
            }
            if changed:
                meta["generation"] = int(ometa.get("generation", 1)) + 1
        if rt.kind == "Pod":
            validate_pod_update(old, new)
        if subresource != "status":
            self.kueue.validate(rt, new)
        if params.get("dryRun"):
            return self.out(rt, version, new)
        self.update_object(rt, new, old)
        self.settle()
        return self.out(rt, version, new)

    def api_replace(
        self,
        rt: ResourceType,
        version: str,
        ns: str,
        name: str,
        body: Any,
        subresource: str,
        params: dict[str, str],
    ) -> Obj:
        """PUT an object or its /status."""
        old = self._find(rt, ns, name)
        if not isinstance(body, dict):
            raise errors.bad_request("the body of the request must be an object")
        if rt.is_custom and not (body.get("metadata") or {}).get("resourceVersion"):
            raise errors.invalid(
                rt.kind,
                rt.group,
                name,
                [
                    errors.Cause(
                        "metadata.resourceVersion",
                        "FieldValueInvalid",
                        "Invalid value: 0x0: must be specified for an update",
                    )
                ],
            )
        return self._write_update(rt, version, old, copy.deepcopy(body), subresource, params)

    def api_patch(
        self,
        rt: ResourceType,
        version: str,
        ns: str,
        name: str,
        patch: Any,
        ctype: str,
        subresource: str,
        params: dict[str, str],
    ) -> Obj:
        """PATCH with merge, strategic merge, JSON patch or server-side apply."""
        obj = self.store.get(rt.key, ns if rt.namespaced else "", name)
        if ctype == "application/apply-patch+yaml":
            if not isinstance(patch, dict):
                raise errors.bad_request("apply patch must be an object")
            if params.get("fieldManager") is None:
                raise errors.bad_request(
                    "PATCH requests with apply patch type must include a fieldManager"
                )
            if obj is None:
                if subresource:
                    raise errors.not_found(rt.plural, rt.group, name)
                patch.setdefault("metadata", {})["name"] = name
                return self.api_create(rt, version, ns, patch, params)
            new = apply_merge(copy.deepcopy(obj), drop_nulls(patch))
            if not (patch.get("metadata") or {}).get("resourceVersion"):
                new["metadata"]["resourceVersion"] = obj["metadata"]["resourceVersion"]
            return self._write_update(rt, version, obj, new, subresource, params)
        if obj is None:
            raise errors.not_found(rt.plural, rt.group, name)
        current = copy.deepcopy(obj)
        if ctype == "application/merge-patch+json":
            new = merge_patch(current, patch)
        elif ctype == "application/strategic-merge-patch+json":
            if rt.is_custom:
                raise errors.ApiError(
                    415,
                    "UnsupportedMediaType",
                    "strategic merge patch is not supported for custom resources",
                )
            new = strategic_merge_patch(current, patch)
        elif ctype == "application/json-patch+json":
            new = json_patch(current, patch)
        else:
            raise errors.unsupported_media(ctype, errors.PATCH_TYPES)
        if not isinstance(new, dict):
            raise errors.bad_request("the patch produced something that is not an object")
        return self._write_update(rt, version, obj, new, subresource, params)

    def api_delete(
        self, rt: ResourceType, version: str, ns: str, name: str, body: Any, params: dict[str, str]
    ) -> tuple[Obj, bool]:
        """DELETE; returns the object and whether it is still present (finalizers)."""
        obj = self._find(rt, ns, name)
        opts = body if isinstance(body, dict) else {}
        pre = opts.get("preconditions") or {}
        if pre.get("uid") and pre["uid"] != obj["metadata"]["uid"]:
            raise errors.conflict(rt.plural, rt.group, name)
        if (
            pre.get("resourceVersion")
            and pre["resourceVersion"] != obj["metadata"]["resourceVersion"]
        ):
            raise errors.conflict(rt.plural, rt.group, name)
        propagation = (
            params.get("propagationPolicy") or opts.get("propagationPolicy") or "Background"
        )
        if opts.get("orphanDependents") is True:
            propagation = "Orphan"
        if params.get("dryRun") or opts.get("dryRun"):
            return self.out(rt, version, obj), True
        self.delete_object(rt, obj, propagation)
        self.settle()
        still = self.store.get(rt.key, ns if rt.namespaced else "", name)
        return self.out(rt, version, still or obj), still is not None

    def api_delete_collection(
        self, rt: ResourceType, version: str, ns: str | None, params: dict[str, str]
    ) -> Obj:
        """DELETE a collection matching selectors."""
        doc = self.api_list(
            rt,
            version,
            ns,
            {k: v for k, v in params.items() if k in ("labelSelector", "fieldSelector")},
        )
        for obj in list(doc["items"]):
            live = self.store.get(
                rt.key, obj["metadata"].get("namespace", ""), obj["metadata"]["name"]
            )
            if live is not None:
                self.delete_object(rt, live, params.get("propagationPolicy") or "Background")
        self.settle()
        return doc

    def node_time(self) -> str:
        """Time stamp for node heartbeats and events (for tests that freeze nothing)."""
        return now_micro()


__all__ = ["ApiError", "Cluster"]
