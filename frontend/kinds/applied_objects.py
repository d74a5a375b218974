"""The Kubernetes objects of a request as gangway applies them, for the kinds whose page
shows them and offers them as a download (``manifests.yaml``)."""

from __future__ import annotations

from typing import Any

from clusters.domain.states import State
from clusters.kube.manifests import cluster_manifests, to_yaml
from clusters.models import ClusterRequest
from clusters.queue.backends import manifest_options


def applied_yaml(row: ClusterRequest) -> str:
    """The row's Kubernetes objects as YAML, as gangway applies them."""
    return to_yaml(cluster_manifests(row, **manifest_options()))


def manifests_context(row: ClusterRequest) -> dict[str, Any]:
    """The page's manifests panel (outside the polled fragment); none once deleted."""
    return {} if row.state == State.DELETED else {"manifests_yaml": applied_yaml(row)}
