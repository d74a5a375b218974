"""Finishing a deletion: the row moves to ``deleted`` once its objects and pods are gone.

A deleting request keeps its GPUs until Kubernetes confirms that its objects and every
one of their pods are gone, so quota is never handed out while pods still hold the
devices. Each kind decides when that is; the move itself is made here.
"""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from clusters.domain.states import State
from clusters.kube import labels
from clusters.kube.gateway import Gateway
from clusters.models import ClusterRequest
from clusters.rows.transitions import transition

DELETED_MESSAGE = "its pods are gone; GPUs released"
RELEASED_MESSAGE = "its pods are gone; GPUs released"


def finish_deletion(cluster: ClusterRequest) -> bool:
    """Mark a deleting request deleted; its GPUs return to the quota with this move (the
    reconciler moves many at once with the same reason and message)."""
    return transition(
        cluster,
        State.DELETED,
        reason=cluster.deletion_reason or "deleted",
        message=DELETED_MESSAGE,
        deleted_at=timezone.now(),
    )


def delete_claim_templates(gw: Gateway, namespace: str, name: str) -> None:
    """Delete the ResourceClaimTemplates applied with the Ray object ``name`` (a DRA
    flavor's; none otherwise). Found by label: the row may be gone (an orphan)."""
    selector = f"{labels.OBJECT}={name},{labels.managed_selector()}"
    for obj in gw.list(
        "resource.k8s.io/v1", "ResourceClaimTemplate", namespace=namespace, label_selector=selector
    ):
        gw.delete("resource.k8s.io/v1", "ResourceClaimTemplate", obj["metadata"]["name"], namespace)


def pods_of(gw: Gateway, cluster: ClusterRequest) -> list[dict[str, Any]]:
    """Every managed pod labelled with the request's id (whatever made it)."""
    return gw.list(
        "v1",
        "Pod",
        namespace=cluster.namespace,
        label_selector=f"{labels.CLUSTER_ID}={cluster.pk},{labels.managed_selector()}",
    )
