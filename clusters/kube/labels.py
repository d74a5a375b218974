"""The label keys every managed Kubernetes object carries, and the values for them.

The reconciler lists managed objects with one label selector per kind and maps them back
to rows with these labels, so they are the contract between the manifests and the code
that watches what was applied. Values are derived from rows only (deterministic).
"""

from __future__ import annotations

from typing import Any

MANAGED_BY = "app.kubernetes.io/managed-by"
TENANT = "gangway.dev/tenant"
CLUSTER_ID = "gangway.dev/cluster-id"
OWNER = "gangway.dev/owner"
KIND = "gangway.dev/kind"
# The Ray object a request's claim templates go with (they are deleted with it, found by it).
OBJECT = "gangway.dev/object"
# Kueue: the LocalQueue a RayCluster joins and its WorkloadPriorityClass.
KUEUE_QUEUE_NAME = "kueue.x-k8s.io/queue-name"
KUEUE_PRIORITY_CLASS = "kueue.x-k8s.io/priority-class"
# KAI: the scheduling queue of a pod (fractional GPU sharing).
KAI_QUEUE = "kai.scheduler/queue"

MANAGER = "gangway"


def managed_selector() -> str:
    """The label selector that matches every object the control plane manages."""
    return f"{MANAGED_BY}={MANAGER}"


def tenant_labels(tenant: Any) -> dict[str, str]:
    """Labels of a tenant-level object (namespace bundle, queues)."""
    return {MANAGED_BY: MANAGER, TENANT: str(tenant.slug)}


def cluster_labels(cluster: Any) -> dict[str, str]:
    """Labels of one cluster's objects and of its pods.

    An unsaved request (the dry-run) has no primary key yet; it is labelled ``"0"`` so that
    the dry-run shows the same shape as what will be applied, with a placeholder id.
    """
    labels = tenant_labels(cluster.tenant)
    labels[CLUSTER_ID] = str(cluster.pk or 0)
    labels[OWNER] = label_value(str(cluster.owner.username))
    labels[KIND] = str(cluster.kind)
    return labels


def label_value(value: str) -> str:
    """Make a user-chosen string a valid label value (<= 63 chars, alphanumerics at the ends).

    Django usernames allow ``@``, ``+`` and up to 150 characters; label values do not.
    """
    cleaned = "".join(
        ch if (ch.isascii() and ch.isalnum()) or ch in "-_." else "_" for ch in value
    )[:63]
    return cleaned.strip("-_.") or "unknown"
