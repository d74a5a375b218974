"""Golden files: the YAML of a dev cluster, a prod cluster and a tenant bundle.

A change to a manifest fails here with a unified diff of the YAML. When the change is
intended, regenerate with ``UPDATE_GOLDEN=1 pytest tests/clusters/test_golden.py`` and
review the diff in the commit.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Any

import pytest

from clusters.kube.manifests import cluster_manifests, tenant_bundle, to_yaml
from tenants.models import DeviceMode
from tests.factories import GpuFlavorFactory

GOLDEN = Path(__file__).parent / "golden"


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.write_text(text)
        return
    expected = path.read_text() if path.exists() else ""
    if text != expected:
        diff = "".join(
            difflib.unified_diff(
                expected.splitlines(keepends=True),
                text.splitlines(keepends=True),
                fromfile=f"golden/{name}",
                tofile="generated",
            )
        )
        pytest.fail(f"{name} changed (UPDATE_GOLDEN=1 to accept):\n{diff}", pytrace=False)


def test_dev_cluster(make_cluster: Any) -> None:
    cluster = make_cluster(pk=42, name="bob-dev-a1b2c", workers=2)
    check_golden("dev-cluster.yaml", to_yaml(cluster_manifests(cluster)))


def test_prod_cluster(make_cluster: Any, alice: Any) -> None:
    cluster = make_cluster(
        pk=43, owner=alice, name="train", kind="prod", workers=2, min_workers=1, max_workers=4
    )
    # Autoscaling is for the built-in queue: Kueue admits a RayCluster at one fixed size.
    check_golden("prod-cluster.yaml", to_yaml(cluster_manifests(cluster)))


def test_dev_cluster_on_a_mig_slice(make_cluster: Any) -> None:
    mig = GpuFlavorFactory(
        name="h100-1g", gpus_per_node=56, device_mode=DeviceMode.MIG, mig_profile="1g.10gb"
    )
    cluster = make_cluster(pk=44, flavor=mig, name="bob-mig")
    check_golden("dev-cluster-mig.yaml", to_yaml(cluster_manifests(cluster)))


def test_prod_cluster_on_dra_gpus(make_cluster: Any, alice: Any) -> None:
    whole = GpuFlavorFactory(name="h100-dra", device_mode=DeviceMode.DRA)
    cluster = make_cluster(pk=45, owner=alice, flavor=whole, name="train-dra", kind="prod")
    check_golden("prod-cluster-dra.yaml", to_yaml(cluster_manifests(cluster)))


def test_tenant_bundle(acme: Any) -> None:
    objects = tenant_bundle(
        acme, acme.quotas.order_by("flavor__name"), control_plane_namespace="gangway-system"
    )
    check_golden("tenant-bundle.yaml", to_yaml(objects))


def test_a_change_shows_as_a_readable_diff(make_cluster: Any, tmp_path: Path) -> None:
    cluster = make_cluster(pk=42, name="bob-dev-a1b2c", workers=3)
    with pytest.raises(pytest.fail.Exception) as failure:
        check_golden("dev-cluster.yaml", to_yaml(cluster_manifests(cluster)))
    assert "-      replicas: 2\n+      replicas: 3" in str(failure.value)
