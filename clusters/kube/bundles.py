"""A tenant's namespace bundle: claiming the namespace and keeping its objects applied.

Every tenant gets one namespace with a ResourceQuota, LimitRange and network policies
(and its KAI queue or Kueue LocalQueue), rendered from its quota rows.
:func:`ensure_bundle` claims the namespace first (gangway never writes into one it did
not create for the tenant) and re-applies only what changed (:mod:`clusters.kube.applied`).
Everything else written there goes through :func:`apply_into`, which ensures the bundle
first and builds it again when the namespace turns out to be gone.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.conf import settings

from clusters.kube import labels, manifests, topology_queues
from clusters.kube.applied import AppliedCache
from clusters.kube.gateway import Gateway, NamespaceMissing, PermanentKubeError, TransientKubeError
from clusters.kube.priority_classes import kai_priority_classes
from clusters.kube.queues import local_queue
from tenants.models import PriorityClass, Quota, Tenant

_applied = AppliedCache("namespace-bundle")


class UnmanagedNamespace(PermanentKubeError):
    """The tenant's namespace exists but gangway did not create it for this tenant.

    Permanent: a request that needs it fails with this message, and nothing is written
    into the namespace, until an operator removes it or the tenant is given another.
    """


def quotas_by_tenant(tenant_ids: Iterable[int]) -> dict[int, list[Quota]]:
    """The quota rows (with their flavors) of many tenants, in one query: what
    :func:`ensure_bundle` needs for each, read once for a whole pass or batch."""
    found: dict[int, list[Quota]] = {tid: [] for tid in tenant_ids}
    for quota in Quota.objects.unscoped().filter(tenant_id__in=found).select_related("flavor"):
        found[quota.tenant_id].append(quota)
    return found


def tenant_bundle_objects(
    tenant: Tenant, quotas: list[Quota] | None = None
) -> list[dict[str, Any]]:
    """The namespace bundle for a tenant, from its current quota rows (``quotas`` when
    the caller read them already, see :func:`quotas_by_tenant`)."""
    if quotas is None:
        quotas = list(Quota.objects.unscoped().filter(tenant=tenant).select_related("flavor"))
    objects = manifests.tenant_bundle(
        tenant, quotas, control_plane_namespace=settings.CONTROL_PLANE_NAMESPACE
    )
    if settings.KAI_ENABLED:
        objects.append(manifests.kai_queue(tenant, quotas))
        # KAI's Topology of each flavor the tenant may use (cluster-wide, so every
        # tenant with the flavor applies the same object: applying it again is a no-op).
        flavors = {str(q.flavor.name): q.flavor for q in quotas}
        objects += topology_queues.kai_topologies(flavors.values())
        # The PriorityClasses fractional workloads name (cluster-wide, as the Topologies).
        objects += kai_priority_classes(PriorityClass.objects.all())
    if settings.QUEUE_MODE == "kueue":
        # In the bundle, not with the cluster-wide Kueue objects: a namespace built
        # again gets its LocalQueue back with it.
        objects.append(local_queue(tenant))
    return objects


def claim_namespace(tenant: Tenant, namespace: dict[str, Any], gw: Gateway) -> None:
    """Make sure the tenant's namespace is gangway's own before anything is applied to it.

    An absent namespace is created (a create, not an apply, so one made by somebody else
    in the meantime is a conflict and never taken over); an existing one must carry the
    labels gangway gave it for this tenant. Anything else — ``kube-system``, a team's
    namespace that happens to have the derived name — is refused: never relabelled, and
    no quota, limits or network policies are put into it.
    """
    name = str(tenant.namespace)
    existing = gw.get("v1", "Namespace", name)
    if existing is None:
        gw.create(namespace)
        return
    found = (existing.get("metadata") or {}).get("labels") or {}
    if found.get(labels.MANAGED_BY) != labels.MANAGER:
        raise UnmanagedNamespace(
            f"namespace {name} exists and is not managed by gangway; refusing to adopt it"
        )
    if found.get(labels.TENANT) != tenant.slug:
        raise UnmanagedNamespace(
            f"namespace {name} is managed by gangway for tenant "
            f"{found.get(labels.TENANT) or '(none)'}, not {tenant.slug}; refusing to adopt it"
        )


def ensure_bundle(
    tenant: Tenant, gw: Gateway, *, force: bool = False, quotas: list[Quota] | None = None
) -> bool:
    """Apply the tenant's bundle, its namespace claimed first, unless this process
    applied the same one; returns whether it applied. ``quotas``: the tenant's rows,
    when the caller read them for many tenants."""

    def write(objects: list[dict[str, Any]]) -> None:
        claim_namespace(tenant, next(o for o in objects if o["kind"] == "Namespace"), gw)
        for obj in objects:
            if obj["kind"] == "PriorityClass":
                apply_priority_class(obj, gw)
            else:
                gw.apply(obj)

    return _applied.apply(
        _key(gw.member, tenant.pk), tenant_bundle_objects(tenant, quotas), write, force=force
    )


def apply_priority_class(obj: dict[str, Any], gw: Gateway) -> None:
    """Apply a Kubernetes PriorityClass whose value or preemption policy may have
    changed since it was written: the API server refuses to change either in an update,
    so a changed one is deleted and written again (workloads that name it keep their
    priority as admitted; new ones get the new value)."""
    name = obj["metadata"]["name"]
    there = gw.get(obj["apiVersion"], obj["kind"], name)
    fixed = ("value", "preemptionPolicy")
    if there is not None and any(there.get(k) != obj.get(k) for k in fixed):
        gw.delete(obj["apiVersion"], obj["kind"], name)
    gw.apply(obj)


class BatchBundles:
    """Ensures the bundles of the tenants of a batch of rows: each tenant's once, with
    the quota rows of all of them read in one query up front (a batch of admitted
    clusters spans many tenants, and reading each tenant's quotas as its first row came
    would be a query per row)."""

    def __init__(self, tenant_ids: Iterable[int]) -> None:
        self._quotas = quotas_by_tenant(set(tenant_ids))
        self._done: set[tuple[str, int]] = set()  # (member, tenant): a batch spans members

    def ensure(self, tenant: Tenant, gw: Gateway, *, force: bool = False) -> None:
        """:func:`ensure_bundle` for ``tenant``, unless this batch already did (``force``:
        again whatever was applied, as the namespace was found gone)."""
        if (gw.member, tenant.pk) in self._done and not force:
            return
        ensure_bundle(tenant, gw, quotas=self._quotas.get(tenant.pk), force=force)
        self._done.add((gw.member, tenant.pk))


def apply_into(
    tenant: Tenant,
    gw: Gateway,
    objects: Iterable[dict[str, Any]],
    *,
    bundles: BatchBundles | None = None,
) -> None:
    """Apply ``objects`` into the tenant's namespace: the one way gangway writes there.

    The bundle is ensured first (free when this process applied the same one already;
    ``bundles`` in a batch). A write that finds the namespace gone (deleted behind
    gangway's back, or never made by this process's memory of it) builds the bundle
    again and writes once more; if the namespace is still missing then, the error is
    transient, so whoever wrote retries.
    """
    objects = list(objects)
    if bundles is None:
        ensure_bundle(tenant, gw)
    else:
        bundles.ensure(tenant, gw)
    try:
        for obj in objects:
            gw.apply(obj)
        return
    except NamespaceMissing:
        pass
    if bundles is None:
        ensure_bundle(tenant, gw, force=True)
    else:
        bundles.ensure(tenant, gw, force=True)
    try:
        for obj in objects:
            gw.apply(obj)
    except NamespaceMissing as exc:
        raise TransientKubeError(exc.message, status=exc.status) from exc


def forget_bundle(tenant_id: int, member: str = "") -> None:
    """Make the next :func:`ensure_bundle` into ``member`` (its gateway's ``member``)
    re-apply (the namespace may be gone there)."""
    _applied.forget(_key(member, tenant_id))


def _key(member: str, tenant_id: int) -> str:
    """What this process applied is remembered per member: each has its own copy."""
    return f"{member}:{tenant_id}" if member else str(tenant_id)
