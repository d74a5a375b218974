"""An interactive cluster's object (clusters.kinds.raycluster.manifests); the shapes are
pinned by tests/clusters/kube/test_manifests.py and the golden files."""

from __future__ import annotations

from typing import Any

import pytest

from clusters.kinds.raycluster.manifests import manifests, user_env
from clusters.kube.manifests import cluster_manifests

pytestmark = pytest.mark.django_db


def test_one_raycluster_named_as_the_row(make_cluster: Any) -> None:
    row = make_cluster(name="bob-dev-x")
    (obj,) = manifests(row)
    assert (obj["kind"], obj["metadata"]["name"]) == ("RayCluster", "bob-dev-x")
    assert obj["metadata"]["namespace"] == row.tenant.namespace
    assert cluster_manifests(row) == [obj]  # the shared entry point asks the kind


def test_user_env_is_sorted_by_name(make_cluster: Any) -> None:
    row = make_cluster(env={"B": "2", "A": "1"})
    assert user_env(row) == [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]
