"""The service services (clusters.kinds.rayservice.requests) on the database, without a
worker: a service is queued with its details; an update changes its idle policy or
carries an upgrade out (or records its surge); every refusal changes nothing."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.utils import timezone

from clusters.domain.states import State
from clusters.kinds.rayservice import requests as services
from clusters.kinds.rayservice.spec import MAX_SERVICE_NAME, ServiceSpec
from clusters.models import ClusterEvent, ClusterRequest, Service, Surge
from clusters.rows.spec import ClusterSpec
from clusters.rows.transitions import transition
from controlplane.exceptions import ServiceConflict
from tenants.models import AuditEvent
from tests.clusters.kinds.rayservice.samples import STABLE_DIFFUSION, queued_service

pytestmark = pytest.mark.django_db

OTHER = "rayproject/ray:2.40.0-py310-gpu"
NEW_CONFIG = STABLE_DIFFUSION.replace(
    "num_replicas: 1\n        ray", "num_replicas: 2\n        ray"
)


@pytest.fixture(autouse=True)
def _other_image(settings: Any) -> None:
    settings.RAY_IMAGE_ALLOWLIST = [settings.RAY_IMAGE_DEFAULT, OTHER]


def _serving(tenant: Any, owner: Any) -> ClusterRequest:
    """A ready service with an active cluster: a new image takes a second one."""
    row = queued_service(tenant, owner)
    for state in (State.ADMITTED, State.STARTING, State.READY):
        transition(row, state, reason="test")
    Service.objects.filter(pk=row.pk).update(active_cluster="sd-raycluster-a")
    return row


def _everything(row: ClusterRequest) -> tuple[Any, ...]:
    """What an update may write: the row, its details, its surge, events and audit."""
    fresh = ClusterRequest.objects.unscoped().get(pk=row.pk)
    details = Service.objects.get(pk=row.pk)
    surge = Surge.objects.filter(pk=row.pk).values_list("change", "admitted_at").first()
    return (
        fresh.state,
        fresh.image,
        fresh.provision_requested_at,
        details.serve_config,
        details.scale_to_zero,
        details.scale_to_zero_after_minutes,
        surge,
        ClusterEvent.objects.filter(cluster=row).count(),
        AuditEvent.objects.filter(action="service.update").count(),
    )


def test_a_service_is_queued_with_its_details_and_audited(acme: Any, bob: Any, l4: Any) -> None:
    row = services.service_create(
        actor=bob,
        tenant=acme,
        spec=ClusterSpec(kind="dev", flavor=l4, workers=1, name="sd"),
        service=ServiceSpec(serve_config=STABLE_DIFFUSION, scale_to_zero=True),
    )
    assert (row.workload, row.state, row.owner_id) == ("service", State.QUEUED, bob.pk)
    details = Service.objects.get(pk=row.pk)
    assert (details.serve_config, details.upgrade_type) == (STABLE_DIFFUSION, "NewCluster")
    assert details.scale_to_zero and details.scale_to_zero_after_minutes == 30
    assert row.events.get().reason == "requested"
    assert AuditEvent.objects.get(action="service.create").data["upgrade"] == "NewCluster"


def test_a_check_reports_the_name_and_the_serve_config_together(
    acme: Any, bob: Any, l4: Any
) -> None:
    with pytest.raises(ValidationError) as refused:
        services.service_check(
            actor=bob,
            tenant=acme,
            spec=ClusterSpec(kind="dev", flavor=l4, workers=1, name="s" * (MAX_SERVICE_NAME + 1)),
            service=ServiceSpec(serve_config="applications: [not: closed"),
        )
    assert {"name", "serve_config"} <= set(refused.value.message_dict)
    assert f"At most {MAX_SERVICE_NAME} characters" in refused.value.message_dict["name"][0]
    assert not ClusterRequest.objects.exists() and not Service.objects.exists()


def test_the_idle_policy_is_written_once_with_an_event_and_an_audit(acme: Any, bob: Any) -> None:
    row = queued_service(acme, bob)
    services.service_update(
        actor=bob, request=row, scale_to_zero=True, scale_to_zero_after_minutes=45
    )
    details = Service.objects.get(pk=row.pk)
    assert (details.scale_to_zero, details.scale_to_zero_after_minutes) == (True, 45)
    event = ClusterEvent.objects.get(cluster=row, reason="idle_policy")
    assert event.message == "scale to zero after 45 min without requests"
    audit = AuditEvent.objects.get(action="service.update")
    assert audit.data == {"scale_to_zero": True, "scale_to_zero_after_minutes": 45}
    before = _everything(row)
    services.service_update(actor=bob, request=row, scale_to_zero=True)  # no change
    assert _everything(row) == before


def test_a_new_serve_config_before_it_serves_is_written_at_once(acme: Any, bob: Any) -> None:
    row = queued_service(acme, bob)
    services.service_update(actor=bob, request=row, serve_config=NEW_CONFIG)
    assert Service.objects.get(pk=row.pk).serve_config == NEW_CONFIG
    assert not Surge.objects.exists()
    fresh = ClusterRequest.objects.unscoped().get(pk=row.pk)
    assert fresh.provision_requested_at is None  # no RayService yet to apply it to
    assert ClusterEvent.objects.get(cluster=row, reason="upgrade").message == "new Serve config"
    assert AuditEvent.objects.get(action="service.update").data == {"changed": ["Serve config"]}


def test_a_new_image_for_a_serving_service_waits_for_its_surge(acme: Any, bob: Any) -> None:
    row = _serving(acme, bob)
    services.service_update(actor=bob, request=row, image=OTHER)
    surge = Surge.objects.get(pk=row.pk)
    assert (surge.change, surge.purpose, surge.admitted_at) == ({"image": OTHER}, "upgrade", None)
    assert surge.gpus == row.gpus
    assert ClusterRequest.objects.unscoped().get(pk=row.pk).image != OTHER  # not yet
    assert ClusterEvent.objects.filter(cluster=row, reason="upgrade_queued").count() == 1
    # A Serve config asked while it waits joins the same upgrade.
    services.service_update(actor=bob, request=row, serve_config=NEW_CONFIG)
    assert Surge.objects.get(pk=row.pk).change == {"image": OTHER, "serve_config": NEW_CONFIG}
    assert Service.objects.get(pk=row.pk).serve_config == STABLE_DIFFUSION


def test_an_upgrade_while_an_admitted_one_runs_is_a_409_that_changes_nothing(
    acme: Any, bob: Any
) -> None:
    row = _serving(acme, bob)
    services.service_update(actor=bob, request=row, image=OTHER)
    Surge.objects.filter(pk=row.pk).update(admitted_at=timezone.now())
    before = _everything(row)
    with pytest.raises(ServiceConflict) as refused:
        # The idle policy asked with it is refused with it: one transaction.
        services.service_update(actor=bob, request=row, serve_config=NEW_CONFIG, scale_to_zero=True)
    assert refused.value.code == "upgrade_in_progress"
    assert _everything(row) == before


def test_refusals_change_nothing(acme: Any, alice: Any, bob: Any, vera: Any) -> None:
    row = queued_service(acme, bob)
    before = _everything(row)
    with pytest.raises(PermissionDenied):
        services.service_update(actor=vera, request=row, scale_to_zero=True)
    with pytest.raises(ValidationError) as refused:
        services.service_update(actor=alice, request=row, scale_to_zero_after_minutes=0)
    assert "scale_to_zero_after_minutes" in refused.value.message_dict
    with pytest.raises(ValidationError) as refused:
        services.service_update(actor=bob, request=row, image="evil/ray:latest", scale_to_zero=True)
    assert "image" in refused.value.message_dict
    with pytest.raises(ValidationError):
        services.service_update(actor=bob, request=row, serve_config="applications: [")
    assert _everything(row) == before

    transition(row, State.DELETING, reason="test")
    with pytest.raises(ServiceConflict) as conflict:
        services.service_update(actor=alice, request=row, scale_to_zero=True)
    assert conflict.value.code == "invalid_state"
    assert "is deleting; it can no longer be changed" in conflict.value.message
    assert Service.objects.get(pk=row.pk).scale_to_zero is False


def test_a_dry_run_writes_nothing(acme: Any, bob: Any, l4: Any) -> None:
    verdict = services.service_dry_run(
        tenant=acme,
        owner=bob,
        spec=ClusterSpec(kind="dev", flavor=l4, workers=1, name="sd"),
        service=ServiceSpec(serve_config=STABLE_DIFFUSION),
        role=None,
    )
    assert (verdict["verdict"], verdict["flavor"]) == ("fits_now", "l4")
    with pytest.raises(ValidationError):  # the service's own checks are the create's
        services.service_dry_run(
            tenant=acme,
            owner=bob,
            spec=ClusterSpec(kind="dev", flavor=l4, workers=1, name="sd"),
            service=ServiceSpec(serve_config="applications: ["),
            role=None,
        )
    assert not ClusterRequest.objects.exists() and not Service.objects.exists()
