"""Provisioning steps: make Kubernetes match one cluster request's row.

:func:`converge` looks at the row's state and does the one idempotent thing that state
asks for — apply the tenant bundle and the RayCluster, suspend it, or delete it and
finish the deletion once its pods are gone. It is safe to run twice, in parallel, or
after a crash at any point: applies are server-side applies of deterministic objects,
deletes of absent objects succeed, and state moves are conditional UPDATEs.
"""

from __future__ import annotations

import hashlib
import json
import threading
from typing import Any

from django.conf import settings
from django.utils import timezone

from clusters.kube import labels, manifests
from clusters.kube.gateway import Gateway, PermanentKubeError, get_gateway
from clusters.models import ClusterRequest
from clusters.states import State
from clusters.transitions import transition
from tenants.models import Quota, Tenant

# Last bundle applied per tenant in this process, so the reconciler re-applies a bundle
# only when the tenant's quota changed (or its namespace vanished). Losing it on restart
# costs one idempotent re-apply.
_bundle_hashes: dict[int, str] = {}
_bundle_lock = threading.Lock()


def tenant_bundle_objects(tenant: Tenant) -> list[dict[str, Any]]:
    """The namespace bundle for a tenant, from its current quota rows."""
    quotas = list(Quota.objects.unscoped().filter(tenant=tenant).select_related("flavor"))
    objects = manifests.tenant_bundle(
        tenant, quotas, control_plane_namespace=settings.CONTROL_PLANE_NAMESPACE
    )
    if settings.KAI_ENABLED:
        objects.append(manifests.kai_queue(tenant, quotas))
    return objects


class UnmanagedNamespace(PermanentKubeError):
    """The tenant's namespace exists but gangway did not create it for this tenant.

    Permanent: a request that needs it fails with this message, and nothing is written
    into the namespace, until an operator removes it or the tenant is given another.
    """


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


def ensure_bundle(tenant: Tenant, gw: Gateway, *, force: bool = False) -> bool:
    """Apply the tenant's bundle unless this process already applied the same one.

    The namespace is claimed first (:func:`claim_namespace`), so a bundle is never
    applied into a namespace gangway does not own.
    """
    objects = tenant_bundle_objects(tenant)
    digest = hashlib.sha256(json.dumps(objects, sort_keys=True).encode()).hexdigest()
    with _bundle_lock:
        if not force and _bundle_hashes.get(tenant.pk) == digest:
            return False
    claim_namespace(tenant, next(o for o in objects if o["kind"] == "Namespace"), gw)
    for obj in objects:
        gw.apply(obj)
    with _bundle_lock:
        _bundle_hashes[tenant.pk] = digest
    return True


def forget_bundle(tenant_id: int) -> None:
    """Make the next :func:`ensure_bundle` re-apply (the namespace may be gone)."""
    with _bundle_lock:
        _bundle_hashes.pop(tenant_id, None)


def cluster_objects(cluster: ClusterRequest) -> list[dict[str, Any]]:
    """The objects applied for one cluster, with ``spec.suspend`` following the row."""
    objects = manifests.cluster_manifests(
        cluster, queue_mode=settings.QUEUE_MODE, kai_enabled=settings.KAI_ENABLED
    )
    if settings.QUEUE_MODE != "kueue":
        for obj in objects:
            if obj.get("kind") == "RayCluster":
                obj["spec"]["suspend"] = cluster.state == State.SUSPENDED
    return objects


def apply_cluster(cluster: ClusterRequest, gw: Gateway) -> None:
    """Apply the tenant bundle and the cluster's objects (idempotent)."""
    ensure_bundle(cluster.tenant, gw)
    for obj in cluster_objects(cluster):
        gw.apply(obj)


def raycluster_gone(cluster: ClusterRequest, gw: Gateway) -> bool:
    """True when neither the RayCluster nor any of its pods exist any more."""
    if gw.get("ray.io/v1", "RayCluster", cluster.name, cluster.namespace) is not None:
        return False
    pods = gw.list(
        "v1", "Pod", namespace=cluster.namespace, label_selector=f"ray.io/cluster={cluster.name}"
    )
    return not pods


def finish_deletion(cluster: ClusterRequest) -> bool:
    """Mark a deleting cluster deleted; its GPUs return to the quota with this move."""
    return transition(
        cluster,
        State.DELETED,
        reason=cluster.deletion_reason or "deleted",
        message="its pods are gone; GPUs released",
        deleted_at=timezone.now(),
    )


def converge(cluster: ClusterRequest, gw: Gateway | None = None) -> None:
    """Do what the row's state asks of Kubernetes; see the module docstring."""
    gw = gw or get_gateway()
    state = cluster.state
    if settings.QUEUE_MODE == "kueue":
        # Kueue decides admission: a queued request's RayCluster is written at once (Kueue
        # suspends it until its Workload is admitted), and suspension deletes the object,
        # since under Kueue a RayCluster holds its quota until it is deleted.
        if state == State.QUEUED:
            apply_cluster(cluster, gw)
            return
        if state == State.SUSPENDED:
            gw.delete("ray.io/v1", "RayCluster", cluster.name, cluster.namespace)
            return
    if state == State.ADMITTED:
        apply_cluster(cluster, gw)
        transition(
            cluster,
            State.PROVISIONING,
            reason="applied",
            message="RayCluster applied; waiting for its pods",
        )
    elif state in (State.PROVISIONING, State.READY, State.SUSPENDED):
        apply_cluster(cluster, gw)
    elif state == State.DELETING:
        gw.delete("ray.io/v1", "RayCluster", cluster.name, cluster.namespace)
        if raycluster_gone(cluster, gw):
            finish_deletion(cluster)
