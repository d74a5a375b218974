"""A service's object (clusters.kinds.rayservice.manifests): a RayService whose
``rayClusterConfig`` is the RayCluster spec a cluster of its shape gets, and which
kubesim's RayService schema and rules accept, for every upgrade strategy."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from clusters.kinds.raycluster.manifests import raycluster
from clusters.kinds.rayservice.manifests import (
    GATEWAY_CLASS_NAME,
    SERVE_PORT,
    keep_admission,
    manifests,
)
from clusters.kinds.rayservice.manifests import rayservice as build
from clusters.kube.bundles import apply_into
from clusters.kube.gateway import get_gateway
from tests.clusters.engine.conftest import running_kubesim
from tests.clusters.kinds.rayservice.samples import AUTOSCALING, STABLE_DIFFUSION

pytestmark = pytest.mark.django_db

INCREMENTAL = SimpleNamespace(
    serve_config=AUTOSCALING,
    upgrade_type="NewClusterWithIncrementalUpgrade",
    upgrade_options={"maxSurgePercent": 50, "stepSizePercent": 25, "intervalSeconds": 10},
)


def _details(**fields: Any) -> Any:
    values = {"serve_config": STABLE_DIFFUSION, "upgrade_type": "NewCluster"}
    values.update(upgrade_options={}, **fields)
    return SimpleNamespace(**values)


def _autoscaling(make_cluster: Any, alice: Any) -> Any:
    return make_cluster(
        owner=alice, name="echo", kind="prod", workers=1, min_workers=1, max_workers=3
    )


def test_an_autoscaling_service_is_written_at_its_guaranteed_size(
    make_cluster: Any, alice: Any
) -> None:
    """Charged at min_workers, its RayService says so; what it may run beyond is the
    RayCluster's (growth.py), so the RayService's spec never changes with it."""
    obj = build(_autoscaling(make_cluster, alice), INCREMENTAL)
    (group,) = obj["spec"]["rayClusterConfig"]["workerGroupSpecs"]
    assert (group["replicas"], group["minReplicas"], group["maxReplicas"]) == (1, 1, 1)
    assert obj["spec"]["rayClusterConfig"]["enableInTreeAutoscaling"] is True
    # Under Kueue (no growth there) the group keeps its range, as a cluster's does.
    (kueue,) = build(_autoscaling(make_cluster, alice), INCREMENTAL, queue_mode="kueue")["spec"][
        "rayClusterConfig"
    ]["workerGroupSpecs"]
    assert kueue["maxReplicas"] == 3
    # An incremental upgrade's new cluster starts at the surge (KubeRay creates it at
    # minReplicas): 50 % of 4 guaranteed workers; a NewCluster one keeps its floor.
    four = make_cluster(
        owner=alice, name="four", kind="prod", workers=4, min_workers=4, max_workers=5
    )
    (group,) = build(four, INCREMENTAL)["spec"]["rayClusterConfig"]["workerGroupSpecs"]
    assert (group["replicas"], group["minReplicas"], group["maxReplicas"]) == (4, 2, 4)
    (whole,) = build(four, _details())["spec"]["rayClusterConfig"]["workerGroupSpecs"]
    assert (whole["replicas"], whole["minReplicas"], whole["maxReplicas"]) == (4, 4, 4)


def test_a_rayservice_embeds_the_clusters_raycluster_spec(make_cluster: Any) -> None:
    row = make_cluster(name="sd", workload="service")
    obj = build(row, _details())
    assert obj["kind"] == "RayService" and obj["metadata"]["name"] == "sd"
    assert obj["spec"]["serveConfigV2"] == STABLE_DIFFUSION
    assert obj["spec"]["upgradeStrategy"] == {"type": "NewCluster"}
    spec = raycluster(row)["spec"]
    head = spec["headGroupSpec"]["template"]["spec"]["containers"][0]
    head["ports"].append({"name": "serve", "containerPort": SERVE_PORT, "protocol": "TCP"})
    assert obj["spec"]["rayClusterConfig"] == spec


def test_in_kueue_mode_a_rayservice_is_a_queued_elastic_job(make_cluster: Any) -> None:
    row = make_cluster(name="sd", workload="service")
    obj = build(row, _details(), queue_mode="kueue")
    meta = obj["metadata"]
    assert meta["labels"]["kueue.x-k8s.io/queue-name"] == "gangway"
    assert meta["labels"]["kueue.x-k8s.io/priority-class"] == str(row.kind)
    assert meta["annotations"] == {"kueue.x-k8s.io/elastic-job": "true"}
    config = obj["spec"]["rayClusterConfig"]
    templates = [config["headGroupSpec"]["template"]]
    templates += [g["template"] for g in config["workerGroupSpecs"]]
    for template in templates:
        assert template["spec"]["schedulingGates"] == [{"name": "kueue.x-k8s.io/elastic-job"}]
    assert "suspend" not in config  # Kueue's to hold and release
    plain = build(row, _details())
    assert "annotations" not in plain["metadata"]
    assert (
        "schedulingGates"
        not in plain["spec"]["rayClusterConfig"]["headGroupSpec"]["template"]["spec"]
    )


def test_a_fractional_service_gets_kais_scheduler_and_queue(make_cluster: Any, l4: Any) -> None:
    row = make_cluster(name="frac", workload="service", flavor=l4, gpu_fraction="0.5")
    obj = build(row, _details(), kai_enabled=True)
    cluster = raycluster(row, kai_enabled=True)
    queue = cluster["metadata"]["labels"]["kai.scheduler/queue"]
    assert obj["metadata"]["labels"]["kai.scheduler/queue"] == queue
    (worker,) = obj["spec"]["rayClusterConfig"]["workerGroupSpecs"]
    assert worker["template"]["spec"]["schedulerName"] == "kai-scheduler"
    assert worker["template"]["metadata"]["labels"]["kai.scheduler/queue"] == queue


def test_an_incremental_upgrade_carries_its_options(make_cluster: Any, alice: Any) -> None:
    obj = build(_autoscaling(make_cluster, alice), INCREMENTAL)
    assert obj["spec"]["upgradeStrategy"] == {
        "type": "NewClusterWithIncrementalUpgrade",
        "clusterUpgradeOptions": {
            "gatewayClassName": GATEWAY_CLASS_NAME,
            "intervalSeconds": 10,
            "maxSurgePercent": 50,
            "stepSizePercent": 25,
        },
    }
    assert obj["spec"]["rayClusterConfig"]["enableInTreeAutoscaling"] is True


def test_a_candidates_unsaved_details_are_used(make_cluster: Any) -> None:
    row = make_cluster(name="sd", workload="service")
    row._service_details = _details(upgrade_type="None")
    (obj,) = manifests(row)
    assert obj["spec"]["upgradeStrategy"] == {"type": "None"}


def test_kubesim_accepts_every_strategy(
    make_cluster: Any, alice: Any, tmp_path: Path, settings: Any
) -> None:
    rows = [
        (make_cluster(name="sd-new", workload="service"), _details()),
        (make_cluster(name="sd-none", workload="service"), _details(upgrade_type="None")),
        (_autoscaling(make_cluster, alice), INCREMENTAL),
    ]
    with running_kubesim(tmp_path, settings):
        gw = get_gateway()
        for row, details in rows:
            obj = build(row, details)
            apply_into(row.tenant, gw, [obj])
            stored = gw.get("ray.io/v1", "RayService", row.name, row.namespace)
            assert stored is not None
            # Nothing was pruned: the stored spec is what was applied.
            assert stored["spec"]["upgradeStrategy"] == obj["spec"]["upgradeStrategy"]
            assert stored["spec"]["serveConfigV2"] == obj["spec"]["serveConfigV2"]
            head = stored["spec"]["rayClusterConfig"]["headGroupSpec"]
            assert head == obj["spec"]["rayClusterConfig"]["headGroupSpec"]


def test_keep_admission_keeps_what_kueue_wrote_on_an_admitted_rayservice() -> None:
    def config(worker_meta: dict, selector: dict, suspend: bool | None = None) -> dict:
        spec: dict = {
            "headGroupSpec": {"template": {"metadata": {}, "spec": {}}},
            "workerGroupSpecs": [
                {"groupName": "w", "template": {"metadata": worker_meta, "spec": {}}}
            ],
        }
        spec["workerGroupSpecs"][0]["template"]["spec"]["nodeSelector"] = selector
        if suspend is not None:
            spec["suspend"] = suspend
        return {"spec": {"rayClusterConfig": spec}}

    kueue = {
        "labels": {"kueue.x-k8s.io/podset": "w", "other": "x"},
        "annotations": {"kueue.x-k8s.io/workload-slice-name": "rayservice-sd-1"},
    }
    live = config(kueue, {"nvidia.com/gpu.product": "L4"}, suspend=False)
    ours = config({"labels": {"mine": "y"}}, {})
    keep_admission(ours, live)
    template = ours["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]["template"]
    assert template["metadata"] == {
        "labels": {"kueue.x-k8s.io/podset": "w", "mine": "y"},
        "annotations": {"kueue.x-k8s.io/workload-slice-name": "rayservice-sd-1"},
    }
    assert template["spec"]["nodeSelector"] == {"nvidia.com/gpu.product": "L4"}

    held = config({"labels": {"mine": "y"}}, {})
    keep_admission(held, config(kueue, {"a": "b"}, suspend=True))  # Kueue holds it: nothing
    keep_admission(held, None)
    assert held == config({"labels": {"mine": "y"}}, {})
