"""Finishing a deletion: the RayCluster goes, then its pods, then the row's GPUs.

A deleting request keeps its GPUs until Kubernetes confirms that the RayCluster and
every one of its pods are gone, so quota is never handed out while pods still hold the
devices. The provisioning task and the reconciler both finish deletions, through these
functions and nothing else.
"""

from __future__ import annotations

from django.utils import timezone

from clusters.domain.states import State
from clusters.kube.gateway import Gateway
from clusters.models import ClusterRequest
from clusters.rows.transitions import transition

RAYCLUSTER = ("ray.io/v1", "RayCluster")


def delete_raycluster(gw: Gateway, namespace: str, name: str) -> None:
    """Ask Kubernetes to delete a RayCluster (its pods follow); absent is fine.

    The one RayCluster delete of the product (deploy's RBAC test reads the kinds deleted
    from calls written out like this one).
    """
    gw.delete("ray.io/v1", "RayCluster", name, namespace)


def raycluster_gone(cluster: ClusterRequest, gw: Gateway) -> bool:
    """True when neither the RayCluster nor any of its pods exist any more."""
    if gw.get(*RAYCLUSTER, cluster.name, cluster.namespace) is not None:
        return False
    pods = gw.list(
        "v1", "Pod", namespace=cluster.namespace, label_selector=f"ray.io/cluster={cluster.name}"
    )
    return not pods


DELETED_MESSAGE = "its pods are gone; GPUs released"


def finish_deletion(cluster: ClusterRequest) -> bool:
    """Mark a deleting cluster deleted; its GPUs return to the quota with this move (the
    reconciler moves many at once with the same reason and message)."""
    return transition(
        cluster,
        State.DELETED,
        reason=cluster.deletion_reason or "deleted",
        message=DELETED_MESSAGE,
        deleted_at=timezone.now(),
    )


def converge_deletion(cluster: ClusterRequest, gw: Gateway) -> None:
    """Delete the RayCluster, and mark the row deleted once nothing of it is left."""
    delete_raycluster(gw, cluster.namespace, cluster.name)
    if raycluster_gone(cluster, gw):
        finish_deletion(cluster)
