"""The services pages through Django's test client: list, new form (a service call) and
its verdict panel, the detail page with its applications, and the delete button."""

from __future__ import annotations

from typing import Any

import pytest

from clusters.domain.states import State
from clusters.kinds.rayservice import requests as serving
from clusters.kinds.rayservice.spec import ServiceSpec
from clusters.models import ClusterRequest, Service
from clusters.rows.spec import ClusterSpec
from tests.clusters.kinds.rayservice.samples import STABLE_DIFFUSION
from tests.frontend.test_pages import client_for

pytestmark = pytest.mark.django_db

SERVICES = "/t/acme/services/"
NEW = SERVICES + "new/"
FORM = {
    "name": "sd",
    "kind": "dev",
    "flavor": "h100",
    "workers": 1,
    "serve_config": STABLE_DIFFUSION,
    "upgrade_type": "NewCluster",
}


@pytest.fixture
def queued_service(acme: Any, bob: Any, h100: Any) -> ClusterRequest:
    spec = ClusterSpec(kind="dev", flavor=h100, workers=1, name="sd")
    return serving.service_create(
        actor=bob, tenant=acme, spec=spec, service=ServiceSpec(serve_config=STABLE_DIFFUSION)
    )


def test_pages_render_and_show_the_applications(bob: Any, queued_service: Any) -> None:
    client = client_for(bob)
    for url in (SERVICES, NEW, f"{SERVICES}sd/", f"{SERVICES}sd/log/"):
        assert client.get(url).status_code == 200, url
    listing = client.get(SERVICES).content.decode()
    assert "sd" in listing and "badge-queued" in listing
    # What KubeRay reported, as the engine folds it.
    Service.objects.filter(pk=queued_service.pk).update(
        applications={
            "stable_diffusion": {
                "status": "RUNNING",
                "message": "",
                "deployments": {"APIIngress": {"status": "HEALTHY", "message": ""}},
            }
        },
        active_cluster="sd-raycluster-abcde",
    )
    ClusterRequest.objects.filter(pk=queued_service.pk).update(state=State.READY)
    page = client.get(f"{SERVICES}sd/").content.decode()
    assert 'data-application="stable_diffusion"' in page and "APIIngress" in page
    assert "sd-raycluster-abcde" in page and "import_path" in page
    assert "RayService" in page  # the manifests


def test_the_new_form_creates_a_service(bob: Any, h100: Any, acme: Any) -> None:
    client = client_for(bob)
    verdict = client.post(NEW + "verdict/", FORM)
    assert verdict.status_code == 200 and "fits" in verdict.content.decode().lower()
    response = client.post(NEW, FORM)
    assert response.status_code == 302 and response["Location"].endswith(f"{SERVICES}sd/")
    assert Service.objects.get(request__name="sd").serve_config == STABLE_DIFFUSION


def test_the_form_says_how_a_service_is_charged_and_shows_a_config_example(
    alice: Any, h100: Any, acme: Any
) -> None:
    admin = client_for(alice)  # production shapes (min and max workers) are the admins'
    page = admin.get(NEW).content.decode()
    # A service is charged at min workers (it grows into borrowed quota), a cluster at max.
    assert "The quota is charged for min workers" in page
    assert "charged for max workers" not in page
    assert 'placeholder="applications:' in page and "import_path: demo_serve" in page
    assert "charged for max workers" in admin.get("/t/acme/clusters/new/").content.decode()


def test_a_wrong_config_comes_back_on_its_field(bob: Any, h100: Any, acme: Any) -> None:
    response = client_for(bob).post(NEW, {**FORM, "serve_config": "applications: []"})
    assert response.status_code == 400
    assert "one or more applications" in response.content.decode()
    assert not ClusterRequest.objects.unscoped().exists()


INCREMENTAL = {**FORM, "upgrade_type": "NewClusterWithIncrementalUpgrade"}


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        ({}, "Required for NewClusterWithIncrementalUpgrade"),  # no step, no interval
        (
            {"step_size_percent": 10, "interval_seconds": 5},
            "needs an autoscaling worker group",  # a dev shape, as KubeRay requires
        ),
        ({"step_size_percent": 0, "interval_seconds": 5}, "greater than or equal to 1"),
        (
            {"max_surge_percent": 20, "step_size_percent": 30, "interval_seconds": 5},
            "At most the max surge",
        ),
    ],
)
def test_an_incremental_upgrade_without_what_it_needs_comes_back_saying_so(
    bob: Any, h100: Any, acme: Any, fields: dict[str, Any], said: str
) -> None:
    response = client_for(bob).post(NEW, {**INCREMENTAL, **fields})
    assert response.status_code == 400
    assert said in response.content.decode()
    assert not ClusterRequest.objects.unscoped().exists()


def test_options_of_another_strategy_are_not_sent(bob: Any, h100: Any, acme: Any) -> None:
    response = client_for(bob).post(NEW, {**FORM, "step_size_percent": 10})
    assert response.status_code == 302
    assert Service.objects.get(request__name="sd").upgrade_options == {}


def test_the_delete_button(bob: Any, queued_service: Any) -> None:
    response = client_for(bob).post(f"{SERVICES}sd/delete/")
    assert response.status_code == 302
    queued_service.refresh_from_db()
    assert queued_service.state in (State.DELETING, State.DELETED)
