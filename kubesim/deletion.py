"""Deletion semantics: finalizers, cascading through ownerReferences, namespace termination.

An object with finalizers gets a ``deletionTimestamp`` and stays until they are removed.
Background (the default) and Foreground delete dependents at once (one another live owner
references only loses the reference); Foreground keeps the owner, with
``foregroundDeletion``, only while a dependent is held by a finalizer; Orphan strips the
dependents' owner reference. A deleted namespace is Terminating until it is empty. What
waits is finished by :meth:`Deletion.finish`, run in every settle pass.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubesim.resources import ResourceType
from kubesim.store import Obj
from kubesim.util import now

if TYPE_CHECKING:
    from kubesim.controller import ClusterView


class Deletion:
    """Deletes objects for the cluster and finishes what finalizers and dependents held."""

    def __init__(self, cluster: ClusterView) -> None:
        self.cluster = cluster
        self.reset()

    def reset(self) -> None:
        """Forget pending foreground deletions (the store was wiped or reloaded)."""
        # Owners deleted in the foreground that wait for their dependents: (key, ns, name).
        self.foreground: set[tuple[str, str, str]] = set()

    def delete(self, rt: ResourceType, obj: Obj, propagation: str = "Background") -> Obj:
        """Delete ``obj`` as ``propagation`` (Background, Foreground or Orphan) says; the
        object, which is still stored when a finalizer holds it."""
        meta = obj["metadata"]
        uid = meta["uid"]
        if rt.kind == "Namespace":
            return self._delete_namespace(obj)
        if propagation == "Orphan":
            for ref in self.cluster.store.dependents(uid):
                dep = self.cluster.store.get(*ref)
                if dep is not None:
                    dep["metadata"]["ownerReferences"] = [
                        o for o in dep["metadata"].get("ownerReferences", []) if o.get("uid") != uid
                    ]
                    self.cluster.update_object(self.cluster.rt(ref[0]), dep)
        else:
            self._cascade(uid, propagation)
        finalizers = list(meta.get("finalizers") or [])
        if propagation == "Foreground" and self.cluster.store.dependents(uid):
            if "foregroundDeletion" not in finalizers:
                finalizers.append("foregroundDeletion")
            self.foreground.add((rt.key, meta.get("namespace", ""), meta["name"]))
        if finalizers:
            if not meta.get("deletionTimestamp"):
                meta["deletionTimestamp"] = now()
                meta["deletionGracePeriodSeconds"] = 0
            meta["finalizers"] = finalizers
            self.cluster.update_object(rt, obj)
            return obj
        self.cluster.remove_object(rt, obj)
        return obj

    def _cascade(self, uid: str, propagation: str) -> None:
        """Delete the dependents of ``uid`` but those another live owner keeps."""
        for ref in self.cluster.store.dependents(uid):
            dep = self.cluster.store.get(*ref)
            if dep is None:
                continue
            owners = [
                o
                for o in dep["metadata"].get("ownerReferences", [])
                if o.get("uid") != uid and o.get("uid") in self.cluster.store.by_uid
            ]
            if owners:
                # Another live owner keeps it; only drop the reference to the deleted one.
                dep["metadata"]["ownerReferences"] = owners
                self.cluster.update_object(self.cluster.rt(ref[0]), dep)
                continue
            self.delete(self.cluster.rt(ref[0]), dep, propagation)

    def finish(self) -> bool:
        """Complete what waited: foreground deletions whose dependents are gone, and
        terminating namespaces now empty. True when anything was written."""
        done = False
        for key, ns, name in list(self.foreground):
            obj = self.cluster.store.get(key, ns, name)
            if obj is None:
                self.foreground.discard((key, ns, name))
                continue
            if self.cluster.store.dependents(obj["metadata"]["uid"]):
                continue
            self.foreground.discard((key, ns, name))
            obj["metadata"]["finalizers"] = [
                f for f in obj["metadata"].get("finalizers", []) if f != "foregroundDeletion"
            ]
            self.cluster.update_object(self.cluster.rt(key), obj)
            done = True
        for nso in list(self.cluster.store.iter("namespaces")):
            if nso["metadata"].get("deletionTimestamp"):
                done = self._try_finish_namespace(nso) or done
        return done

    def _delete_namespace(self, nso: Obj) -> Obj:
        """Mark the namespace Terminating and delete everything in it."""
        meta = nso["metadata"]
        if not meta.get("deletionTimestamp"):
            meta["deletionTimestamp"] = now()
            meta["deletionGracePeriodSeconds"] = 0
            nso["status"] = {"phase": "Terminating"}
            self.cluster.update_object(self.cluster.rt("namespaces"), nso)
        ns = meta["name"]
        for rt in self.cluster.registry.types:
            if not rt.namespaced:
                continue
            for obj in list(self.cluster.store.iter(rt.key, ns)):
                if not obj["metadata"].get("deletionTimestamp"):
                    self.delete(rt, obj, "Background")
        self._try_finish_namespace(nso)
        return nso

    def _try_finish_namespace(self, nso: Obj) -> bool:
        """Remove a terminating namespace once it is empty and has no finalizer left."""
        ns = nso["metadata"]["name"]
        for rt in self.cluster.registry.types:
            if rt.namespaced and self.cluster.store.count(rt.key, ns):
                return False
        if nso["metadata"].get("finalizers"):
            return False
        self.cluster.remove_object(self.cluster.rt("namespaces"), nso)
        return True
