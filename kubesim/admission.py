"""Admission: LimitRange defaults and ResourceQuota enforcement, and the quota controller
that keeps ``status.hard`` / ``status.used`` true.

Usage is kept per namespace incrementally (added on create, removed on delete) so that
admission costs the same with 15 pods or 15,000 in a namespace.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from kubesim import errors, quantity
from kubesim.resources import ResourceType
from kubesim.store import Obj

if TYPE_CHECKING:
    from kubesim.controller import ClusterView

# Object counts with a legacy (unprefixed) quota name.
_LEGACY_COUNTS = {
    "pods": "pods",
    "services": "services",
    "configmaps": "configmaps",
    "secrets": "secrets",
    "resourcequotas": "resourcequotas",
    "persistentvolumeclaims": "persistentvolumeclaims",
}


def _container_amounts(c: dict[str, Any]) -> tuple[dict[str, int], dict[str, int]]:
    res = c.get("resources") or {}
    limits = {k: quantity.amount(k, v) for k, v in (res.get("limits") or {}).items()}
    requests = {k: quantity.amount(k, v) for k, v in (res.get("requests") or {}).items()}
    # A limit with no request means request == limit (Kubernetes defaulting).
    for k, v in limits.items():
        requests.setdefault(k, v)
    return requests, limits


def pod_totals(pod: Obj) -> tuple[dict[str, int], dict[str, int]]:
    """Effective pod requests and limits: sum over containers, at least any init container."""
    spec = pod.get("spec") or {}
    req: Counter[str] = Counter()
    lim: Counter[str] = Counter()
    for c in spec.get("containers") or []:
        r, li = _container_amounts(c)
        req.update(r)
        lim.update(li)
    for c in spec.get("initContainers") or []:
        r, li = _container_amounts(c)
        for k, v in r.items():
            req[k] = max(req[k], v)
        for k, v in li.items():
            lim[k] = max(lim[k], v)
    return dict(req), dict(lim)


def pod_is_terminal(pod: Obj) -> bool:
    """Succeeded and Failed pods no longer count against quota."""
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def usage_of(rt: ResourceType, obj: Obj) -> Counter[str]:
    """What one object adds to its namespace's quota usage."""
    use: Counter[str] = Counter()
    count_name = f"count/{rt.plural}.{rt.group}" if rt.group else f"count/{rt.plural}"
    use[count_name] = 1
    if not rt.group and rt.plural in _LEGACY_COUNTS:
        use[_LEGACY_COUNTS[rt.plural]] = 1
    if rt.kind == "Pod":
        if pod_is_terminal(obj):
            return Counter()
        req, lim = pod_totals(obj)
        for k, v in req.items():
            use[f"requests.{k}"] += v
            if k in ("cpu", "memory", "ephemeral-storage"):
                use[k] += v
            elif "/" in k:
                use[k] += v  # "nvidia.com/gpu" is shorthand for requests.nvidia.com/gpu
        for k, v in lim.items():
            use[f"limits.{k}"] += v
    elif rt.kind == "Service":
        stype = (obj.get("spec") or {}).get("type", "ClusterIP")
        if stype in ("NodePort", "LoadBalancer"):
            use["services.nodeports"] = len((obj.get("spec") or {}).get("ports") or [])
        if stype == "LoadBalancer":
            use["services.loadbalancers"] = 1
    return use


class Quota:
    """ResourceQuota admission and status, LimitRange defaulting."""

    def __init__(self, cluster: ClusterView) -> None:
        self.cluster = cluster
        self.usage: dict[str, Counter[str]] = {}
        self.dirty: set[str] = set()

    def reset(self) -> None:
        """Forget all usage (the store was wiped)."""
        self.usage.clear()
        self.dirty.clear()

    # -- LimitRange ----------------------------------------------------------------------

    def apply_limit_ranges(self, pod: Obj) -> None:
        """Default container requests/limits from the namespace's LimitRanges; refuse
        containers above a LimitRange max."""
        ns = pod["metadata"].get("namespace", "")
        for lr in self.cluster.store.iter("limitranges", ns):
            for item in (lr.get("spec") or {}).get("limits") or []:
                if item.get("type") != "Container":
                    continue
                for c in (pod.get("spec") or {}).get("containers") or []:
                    res = c.setdefault("resources", {})
                    limits = res.setdefault("limits", {})
                    requests = res.setdefault("requests", {})
                    for k, v in (item.get("default") or {}).items():
                        limits.setdefault(k, v)
                    for k, v in (item.get("defaultRequest") or {}).items():
                        requests.setdefault(k, v)
                    for k, v in limits.items():
                        requests.setdefault(k, v)
                    for k, v in (item.get("max") or {}).items():
                        if k in limits and quantity.parse(limits[k]) > quantity.parse(v):
                            raise errors.forbidden(
                                "pods",
                                "",
                                pod["metadata"]["name"],
                                f"maximum {k} usage per Container is {v}, but limit is {limits[k]}",
                            )
                    if not limits:
                        res.pop("limits")
                    if not requests:
                        res.pop("requests")

    # -- ResourceQuota -------------------------------------------------------------------

    def admit(self, rt: ResourceType, obj: Obj, old: Obj | None) -> None:
        """Refuse (403) a create that would push any quota of its namespace over hard."""
        ns = obj["metadata"].get("namespace")
        if not ns or not self.cluster.store.count("resourcequotas", ns):
            return
        delta = usage_of(rt, obj)
        if old is not None:
            delta.subtract(usage_of(rt, old))
        delta = Counter({k: v for k, v in delta.items() if v > 0})
        if not delta:
            return
        used = self.usage.get(ns, Counter())
        name = obj["metadata"].get("name", "")
        for rq in sorted(
            self.cluster.store.iter("resourcequotas", ns), key=lambda q: q["metadata"]["name"]
        ):
            hard = {
                k: quantity.amount(k, v)
                for k, v in ((rq.get("spec") or {}).get("hard") or {}).items()
            }
            if rt.kind == "Pod":
                missing = [
                    k
                    for k in hard
                    if k.startswith(("requests.", "limits."))
                    and "/" not in k
                    and delta.get(k, 0) == 0
                ]
                missing += [k for k in hard if k in ("cpu", "memory") and delta.get(k, 0) == 0]
                if missing:
                    raise errors.forbidden(
                        rt.plural,
                        rt.group,
                        name,
                        f"failed quota: {rq['metadata']['name']}: must "
                        f"specify {','.join(sorted(missing))}",
                    )
            over = sorted(k for k, v in delta.items() if k in hard and used[k] + v > hard[k])
            if over:
                fmt = quantity.format_resource
                req = ",".join(f"{k}={fmt(k, delta[k])}" for k in over)
                use = ",".join(f"{k}={fmt(k, used[k])}" for k in over)
                lim = ",".join(f"{k}={fmt(k, hard[k])}" for k in over)
                raise errors.forbidden(
                    rt.plural,
                    rt.group,
                    name,
                    f"exceeded quota: {rq['metadata']['name']}, requested: "
                    f"{req}, used: {use}, limited: {lim}",
                )

    def on_change(self, rt: ResourceType, old: Obj | None, new: Obj | None) -> None:
        """Keep per-namespace usage in step with the store."""
        if not rt.namespaced or rt.kind == "Event":
            return
        ref = new if new is not None else old
        assert ref is not None
        ns = ref["metadata"].get("namespace", "")
        delta: Counter[str] = Counter()
        if old is not new:
            if new is not None:
                delta.update(usage_of(rt, new))
            if old is not None:
                delta.subtract(usage_of(rt, old))
        changed = {k: v for k, v in delta.items() if v}
        if changed:
            self.usage.setdefault(ns, Counter()).update(changed)
        if rt.kind == "ResourceQuota" or (
            changed and self.cluster.store.count("resourcequotas", ns)
        ):
            self.dirty.add(ns)

    def reconcile(self) -> bool:
        """Write ``status.hard`` and ``status.used`` of quotas whose namespace changed."""
        busy = False
        rt = self.cluster.rt("resourcequotas")
        while self.dirty:
            ns = self.dirty.pop()
            used = self.usage.get(ns, Counter())
            for rq in list(self.cluster.store.iter("resourcequotas", ns)):
                hard = (rq.get("spec") or {}).get("hard") or {}
                status = {
                    "hard": dict(hard),
                    "used": {k: quantity.format_resource(k, max(used[k], 0)) for k in hard},
                }
                if rq.get("status") != status:
                    rq["status"] = status
                    self.cluster.update_object(rt, rq)
                    busy = True
                    self.dirty.discard(ns)
            # Freed quota may let the operator create pods it was refused.
            self.cluster.kuberay.quota_changed(ns)
        return busy


__all__ = ["Quota", "pod_totals", "usage_of"]
