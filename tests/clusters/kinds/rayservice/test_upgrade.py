"""An upgrade's surge on the rows, step by step, without a worker: the update records it
and changes nothing else, the admission pass queues and admits it under the quota, the
kind carries it out and releases it, and any step left half done is taken up again."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ValidationError

from clusters.domain.states import State
from clusters.kinds.rayservice import requests as serving
from clusters.kinds.rayservice import upgrade
from clusters.kinds.rayservice.spec import ServiceSpec
from clusters.models import ClusterRequest, Service, Surge, UsageSpan
from clusters.queue.admission_pass import run_admission_pass
from clusters.rows.spec import ClusterSpec
from clusters.rows.transitions import transition
from controlplane.exceptions import ServiceConflict
from tests.clusters.engine.conftest import room_for_l4
from tests.clusters.kinds.rayservice.samples import STABLE_DIFFUSION

pytestmark = pytest.mark.django_db

OTHER = "rayproject/ray:2.40.0-py310-gpu"
OLD, NEW = "sd-raycluster-aaaaa", "sd-raycluster-bbbbb"


@pytest.fixture(autouse=True)
def _other_image(settings: Any) -> None:
    settings.RAY_IMAGE_ALLOWLIST = [settings.RAY_IMAGE_DEFAULT, OTHER]


@pytest.fixture
def serving_sd(acme: Any, bob: Any, l4: Any) -> ClusterRequest:
    """A ready service on one L4 GPU, with the tenant's L4 quota all used by it."""
    room_for_l4(acme, l4, 1)
    spec = ClusterSpec(kind="dev", flavor=l4, workers=1, name="sd")
    row = serving.service_create(
        actor=bob, tenant=acme, spec=spec, service=ServiceSpec(serve_config=STABLE_DIFFUSION)
    )
    assert run_admission_pass().admitted == [row.pk]
    row.refresh_from_db()
    transition(row, State.STARTING, reason="applied")
    transition(row, State.READY, reason="ready")
    Service.objects.filter(pk=row.pk).update(active_cluster=OLD)
    return _fresh(row)


def _fresh(row: ClusterRequest) -> ClusterRequest:
    return (
        ClusterRequest.objects.unscoped()
        .select_related("tenant", "flavor", "owner", "service", "surge")
        .get(pk=row.pk)
    )


def _admitted_upgrade(row: ClusterRequest, bob: Any, acme: Any, l4: Any) -> None:
    """A new image for ``row``, its surge admitted (room made for it), not carried out."""
    serving.service_update(actor=bob, request=row, image=OTHER)
    room_for_l4(acme, l4, 2)
    run_admission_pass()


def _spans(row: ClusterRequest, *, surge: bool) -> list[UsageSpan]:
    return list(UsageSpan.objects.unscoped().filter(cluster_id=row.pk, surge=surge))


def _pod(cluster: str) -> dict[str, Any]:
    return {"metadata": {"labels": {"ray.io/cluster": cluster}}}


def test_a_new_image_waits_for_its_surge_then_is_carried_out_and_released(
    serving_sd: ClusterRequest, bob: Any, acme: Any, l4: Any
) -> None:
    row = serving.service_update(actor=bob, request=serving_sd, image=OTHER)
    assert row.image != OTHER  # nothing applied before the surge is admitted
    surge = Surge.objects.get(pk=row.pk)
    assert (surge.purpose, surge.gpus, surge.change) == ("upgrade", row.gpus, {"image": OTHER})

    # The quota is used by the service itself: the surge waits and says why.
    assert run_admission_pass().admitted == []
    surge.refresh_from_db()
    assert surge.admitted_at is None and surge.queue_reason == "tenant_quota"
    assert surge.queue_position == 1
    assert surge.queue_message.startswith("upgrade waits for 1 l4 GPU: ")
    assert not _spans(row, surge=True)

    # Room for it: admitted, charged with a span of its own, the row marked for its kind.
    room_for_l4(acme, l4, 2)
    assert run_admission_pass().admitted == []  # a surge is not a request admitted
    surge.refresh_from_db()
    assert surge.admitted_at is not None and surge.applied_at is None
    (span,) = _spans(row, surge=True)
    assert span.ended_at is None and span.gpus == row.gpus
    row = _fresh(row)
    assert row.provision_requested_at is not None and row.image != OTHER

    # The kind carries it out (as converge or the next fold does, once, however often).
    upgrade.surge_step(row)
    upgrade.surge_step(_fresh(row))
    row = _fresh(row)
    assert row.image == OTHER
    surge.refresh_from_db()
    assert surge.applied_at is not None and surge.change["from_cluster"] == OLD
    assert [e.reason for e in row.events.all()].count("upgrade") == 1

    # Held while the switch is under way and while a pod of the old cluster is left.
    Service.objects.filter(pk=row.pk).update(active_cluster=OLD, pending_cluster=NEW)
    upgrade.surge_step(_fresh(row), [_pod(OLD), _pod(NEW)])
    Service.objects.filter(pk=row.pk).update(active_cluster=NEW, pending_cluster="")
    upgrade.surge_step(_fresh(row), [_pod(OLD), _pod(NEW)])
    assert Surge.objects.filter(pk=row.pk).exists()
    upgrade.surge_step(_fresh(row), [_pod(NEW)])
    assert not Surge.objects.filter(pk=row.pk).exists()
    (span,) = _spans(row, surge=True)
    assert span.ended_at is not None
    (own,) = _spans(row, surge=False)
    assert own.ended_at is None


def test_a_serve_config_alone_takes_no_surge(serving_sd: ClusterRequest, bob: Any) -> None:
    config = STABLE_DIFFUSION.replace(
        "num_replicas: 1\n      - name: Stable", "num_replicas: 2\n      - name: Stable"
    )
    serving.service_update(actor=bob, request=serving_sd, serve_config=config)
    assert not Surge.objects.exists()
    assert Service.objects.get(pk=serving_sd.pk).serve_config == config
    assert _fresh(serving_sd).provision_requested_at is not None


def test_bad_input_or_an_upgrade_under_way_changes_nothing(
    serving_sd: ClusterRequest, bob: Any, acme: Any, l4: Any
) -> None:
    serving.service_update(actor=bob, request=serving_sd, image=OTHER)
    with pytest.raises(ValidationError):
        serving.service_update(actor=bob, request=serving_sd, image="evil/ray:latest")
    with pytest.raises(ValidationError):
        serving.service_update(
            actor=bob, request=serving_sd, serve_config="applications: []", image=OTHER
        )
    assert Surge.objects.get(pk=serving_sd.pk).change == {"image": OTHER}

    # A new Serve config while the upgrade waits joins it (one upgrade, one cluster).
    config = STABLE_DIFFUSION.replace("route_prefix: /", "route_prefix: /sd")
    serving.service_update(actor=bob, request=serving_sd, serve_config=config)
    assert Surge.objects.get(pk=serving_sd.pk).change == {"image": OTHER, "serve_config": config}
    assert Service.objects.get(pk=serving_sd.pk).serve_config == STABLE_DIFFUSION

    room_for_l4(acme, l4, 2)
    run_admission_pass()
    with pytest.raises(ServiceConflict) as refused:
        serving.service_update(actor=bob, request=serving_sd, serve_config=STABLE_DIFFUSION)
    assert refused.value.code == "upgrade_in_progress"


def test_a_surge_admitted_but_not_carried_out_outlives_its_requests_release(
    serving_sd: ClusterRequest, bob: Any, acme: Any, l4: Any
) -> None:
    _admitted_upgrade(serving_sd, bob, acme, l4)
    # The service goes back through the queue before its kind carried the upgrade out.
    row = _fresh(serving_sd)
    transition(row, State.QUEUED, reason="evicted")
    surge = Surge.objects.get(pk=row.pk)
    assert surge.admitted_at is None  # in line again, the change kept
    assert all(s.ended_at is not None for s in _spans(row, surge=True))
    # Admitted again, its RayService is written anew: the change goes with it, no surge.
    assert run_admission_pass().admitted == [row.pk]
    row = _fresh(row)
    upgrade.surge_step(row)
    assert _fresh(row).image == OTHER and not Surge.objects.exists()


def test_a_failed_service_gives_its_surge_back(
    serving_sd: ClusterRequest, bob: Any, acme: Any, l4: Any
) -> None:
    _admitted_upgrade(serving_sd, bob, acme, l4)
    upgrade.surge_step(_fresh(serving_sd))
    row = _fresh(serving_sd)
    transition(row, State.FAILED, reason="invalid")
    assert not Surge.objects.exists()
    assert all(s.ended_at is not None for s in UsageSpan.objects.unscoped())


def test_a_waiting_surge_ends_with_its_deleted_service(
    serving_sd: ClusterRequest, bob: Any, acme: Any, l4: Any
) -> None:
    serving.service_update(actor=bob, request=serving_sd, image=OTHER)
    run_admission_pass()  # no room: it waits
    serving.service_delete(actor=bob, request=serving_sd)
    room_for_l4(acme, l4, 2)
    run_admission_pass()  # room now, but a deleting service's surge is not offered
    assert Surge.objects.get(pk=serving_sd.pk).admitted_at is None
    transition(_fresh(serving_sd), State.DELETED, reason="deleted")
    assert not Surge.objects.exists()
