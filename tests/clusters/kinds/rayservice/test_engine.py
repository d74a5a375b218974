"""What a service answers the shared engine, and how KubeRay's status is read onto its
details (clusters.kinds.rayservice.engine); converge and fold run against kubesim in
test_services_loop.py and the upgrade tests."""

from __future__ import annotations

from typing import Any

import pytest

from clusters.domain.states import State
from clusters.engine.pass_state import Seen
from clusters.kinds.rayservice import engine
from clusters.kinds.rayservice.kind import KIND
from clusters.models import ClusterRequest, Service
from clusters.queue.builtin import BuiltinQueue
from clusters.queue.kueue import KueueQueue
from tests.clusters.kinds.rayservice.samples import queued_service

ACTIVE = {
    "rayClusterName": "sd-raycluster-a",
    "applicationStatuses": {
        "stable_diffusion": {
            "status": "RUNNING",
            "serveDeploymentStatuses": {
                "StableDiffusionV2": {"status": "HEALTHY"},
                "APIIngress": {"status": "UPDATING", "message": "scaling up"},
            },
        },
    },
}


def test_applications_are_read_by_name_with_their_deployments() -> None:
    assert engine.applications(ACTIVE) == {
        "stable_diffusion": {
            "status": "RUNNING",
            "message": "",
            "deployments": {
                "APIIngress": {"status": "UPDATING", "message": "scaling up"},
                "StableDiffusionV2": {"status": "HEALTHY", "message": ""},
            },
        }
    }
    assert list(engine.applications(ACTIVE)["stable_diffusion"]["deployments"]) == [
        "APIIngress",
        "StableDiffusionV2",
    ]
    assert engine.applications({}) == {}
    assert engine.applications({"applicationStatuses": {"a": {}}}) == {
        "a": {"status": "", "message": "", "deployments": {}}
    }


def test_a_condition_is_found_by_type_or_empty() -> None:
    status = {"conditions": [{"type": "Ready", "status": "True"}, {"type": "UpgradeInProgress"}]}
    assert engine.condition(status, "Ready") == {"type": "Ready", "status": "True"}
    assert engine.condition(status, "Missing") == {}
    assert engine.condition({"conditions": None}, "Ready") == {}


def test_traffic_reads_each_side_with_kuberay_s_defaults_for_an_unset_one() -> None:
    pending = {"rayClusterName": "sd-raycluster-b", "targetCapacity": 30}
    assert engine.traffic({"rayClusterName": "sd-raycluster-a"}, pending) == {
        # The active side reports nothing yet: KubeRay reads it as whole.
        "active": {
            "cluster": "sd-raycluster-a",
            "target_capacity": 100,
            "traffic_routed_percent": 100,
        },
        "pending": {
            "cluster": "sd-raycluster-b",
            "target_capacity": 30,
            "traffic_routed_percent": 0,
        },
    }
    both = engine.traffic(
        {"rayClusterName": "a", "targetCapacity": 70, "trafficRoutedPercent": 80},
        {"rayClusterName": "b", "targetCapacity": "30", "trafficRoutedPercent": 20},
    )
    assert both["active"]["traffic_routed_percent"] == 80
    assert (both["pending"]["target_capacity"], both["pending"]["traffic_routed_percent"]) == (
        30,
        20,
    )


def test_no_split_without_a_pending_cluster_or_without_its_fields() -> None:
    # Promoted: KubeRay clears the pending side and may leave the active side's fields.
    assert engine.traffic({"rayClusterName": "a", "targetCapacity": 100}, {}) == {}
    # A NewCluster upgrade: a pending cluster, but no split reported.
    assert engine.traffic({"rayClusterName": "a"}, {"rayClusterName": "b"}) == {}


@pytest.mark.django_db
def test_record_status_folds_applications_clusters_and_the_split(
    acme: Any, bob: Any, django_assert_num_queries: Any
) -> None:
    row = (
        ClusterRequest.objects.unscoped()
        .select_related("service")
        .get(pk=queued_service(acme, bob).pk)
    )
    assert KIND.details is not None
    folded = KIND.details.folded
    others = [f.attname for f in Service._meta.concrete_fields if f.name not in folded]
    before = Service.objects.values(*folded, *others).get(pk=row.pk)
    rs = {
        "status": {
            "numServeEndpoints": 2,
            "conditions": [{"type": "UpgradeInProgress", "status": "True"}],
            "activeServiceStatus": ACTIVE,
            "pendingServiceStatus": {"rayClusterName": "sd-raycluster-b", "targetCapacity": 40},
        }
    }
    engine.record_status(row, rs)
    saved = Service.objects.get(pk=row.pk)
    assert (saved.active_cluster, saved.pending_cluster) == ("sd-raycluster-a", "sd-raycluster-b")
    assert saved.upgrading is True and saved.serve_endpoints == 2
    assert saved.applications == engine.applications(ACTIVE)
    assert saved.traffic["pending"] == {
        "cluster": "sd-raycluster-b",
        "target_capacity": 40,
        "traffic_routed_percent": 0,
    }
    assert row.service.traffic == saved.traffic  # the loaded details follow
    # It writes every column the kind folds, and only those.
    after = Service.objects.values(*folded, *others).get(pk=row.pk)
    assert {k for k in after if after[k] != before[k]} == set(folded)
    with django_assert_num_queries(0):  # nothing changed: nothing written
        engine.record_status(row, rs)


@pytest.mark.django_db
def test_before_an_active_cluster_the_pending_side_s_applications_are_shown(
    acme: Any, bob: Any
) -> None:
    row = (
        ClusterRequest.objects.unscoped()
        .select_related("service")
        .get(pk=queued_service(acme, bob).pk)
    )
    engine.record_status(row, {"status": {"pendingServiceStatus": ACTIVE}})
    saved = Service.objects.get(pk=row.pk)
    assert saved.applications == engine.applications(ACTIVE)
    assert (saved.active_cluster, saved.pending_cluster) == ("", "sd-raycluster-a")
    assert saved.traffic == {} and saved.upgrading is False
    # The promoted cluster's status clears what the pending one said.
    engine.record_status(row, {"status": {}})
    saved.refresh_from_db()
    assert (saved.applications, saved.pending_cluster, saved.serve_endpoints) == ({}, "", 0)


@pytest.mark.django_db
def test_what_each_state_asks_of_kubernetes_under_each_queue(
    acme: Any, bob: Any, settings: Any
) -> None:
    builtin, kueue = BuiltinQueue(), KueueQueue()
    assert not engine.wants_object(State.QUEUED, builtin)
    assert engine.wants_object(State.QUEUED, kueue)  # Kueue holds the RayService itself
    assert engine.wants_object(State.READY, builtin) and engine.wants_object(
        State.DELETING, builtin
    )
    assert not engine.wants_object(State.SUSPENDED, kueue)
    assert engine.needs_bundle(State.STARTING) and not engine.needs_bundle(State.QUEUED)
    row = queued_service(acme, bob)
    settings.QUEUE_MODE = "builtin"
    assert not engine.wants_provisioning(row)
    settings.QUEUE_MODE = "kueue"
    assert engine.wants_provisioning(row)
    row.state = State.DELETED
    assert not engine.wants_provisioning(row)
    row.state = State.SUSPENDED
    assert engine.wants_provisioning(row)  # its RayService is deleted
    assert engine.deadline_seconds(row) is None and engine.orphan({"metadata": {}})


def test_the_stamp_is_the_rayservice_s_and_its_pods_resource_versions() -> None:
    key = ("gw-acme", "sd")
    seen = Seen(
        objects={"RayService": {key: {"metadata": {"resourceVersion": "41"}}}},
        pods={},
        pods_by_id={7: [{"metadata": {"resourceVersion": "5"}}, {"metadata": {}}]},
        namespaces=set(),
        events={},
        listed_at={},
    )
    assert engine.objects_stamp(seen, key, 7) == ("41", ("5", None))
    assert engine.objects_stamp(seen, ("gw-acme", "other"), 8) == (None, ())
