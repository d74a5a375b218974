"""The services API without the loop: a wrong body is a 400 that names the field and
writes nothing, the dry-run's verdict carries the RayService, another tenant's service
is a 404, and an upgrade of a queued service changes only its row."""

from __future__ import annotations

from typing import Any

import pytest

from clusters.models import ClusterRequest, Service
from tests.clusters.kinds.rayservice.samples import AUTOSCALING, STABLE_DIFFUSION

pytestmark = pytest.mark.django_db

SERVICES = "/api/v1/tenants/acme/services/"


def _fields(response: Any) -> dict[str, Any]:
    """The fields a 400 names, with their messages."""
    assert response.status_code == 400, response.content
    return dict(response.json()["error"]["fields"])


def _body(**fields: Any) -> dict[str, Any]:
    return {"name": "sd", "flavor": "l4", "workers": 1, "serve_config": STABLE_DIFFUSION, **fields}


@pytest.mark.parametrize(
    ("fields", "field", "said"),
    [
        ({"serve_config": "applications: ["}, "serve_config", "Not valid YAML"),
        ({"serve_config": "applications:\n  - name: a\n"}, "serve_config", "import_path"),
        ({"upgrade_strategy": {"type": "Rolling"}}, "upgrade_strategy.type", "valid choice"),
        (
            {
                "upgrade_strategy": {
                    "type": "NewClusterWithIncrementalUpgrade",
                    "cluster_upgrade_options": {"stepSizePercent": 10, "intervalSeconds": 5},
                }
            },
            "upgrade_strategy",
            "needs an autoscaling worker group",
        ),
        ({"ttl_hours": 4}, "ttl_hours", "Unknown field"),
        ({"name": "s" * 41}, "name", "At most 40"),
    ],
)
def test_a_wrong_service_is_refused_and_nothing_is_written(
    as_user: Any, bob: Any, fields: dict[str, Any], field: str, said: str
) -> None:
    faults = _fields(as_user(bob).post(SERVICES, _body(**fields), format="json"))
    assert said in str(faults.get(field)), faults
    assert not ClusterRequest.objects.unscoped().exists() and not Service.objects.exists()


def test_an_incremental_upgrade_of_an_autoscaling_service_is_accepted(
    as_user: Any, alice: Any
) -> None:
    body = _body(
        name="echo",
        kind="prod",
        flavor="h100",
        workers=1,
        min_workers=1,
        max_workers=2,
        serve_config=AUTOSCALING,
        upgrade_strategy={
            "type": "NewClusterWithIncrementalUpgrade",
            "cluster_upgrade_options": {"stepSizePercent": 25, "intervalSeconds": 10},
        },
    )
    response = as_user(alice).post(SERVICES, body, format="json")
    assert response.status_code == 201, response.content
    strategy = response.json()["service"]["upgrade_strategy"]
    assert strategy["type"] == "NewClusterWithIncrementalUpgrade"
    assert Service.objects.get().upgrade_options == {"stepSizePercent": 25, "intervalSeconds": 10}


def test_the_dry_run_says_it_fits_and_shows_the_rayservice(as_user: Any, bob: Any) -> None:
    response = as_user(bob).post(SERVICES + "dry-run/", _body(), format="json")
    assert response.status_code == 200, response.content
    verdict = response.json()
    assert verdict["verdict"] == "fits_now"
    (obj,) = verdict["manifests"]
    assert obj["kind"] == "RayService" and obj["spec"]["serveConfigV2"] == STABLE_DIFFUSION
    assert not ClusterRequest.objects.unscoped().exists()


def test_a_dry_run_of_a_wrong_config_is_the_same_400(as_user: Any, bob: Any) -> None:
    body = _body(serve_config="applications: []")
    response = as_user(bob).post(SERVICES + "dry-run/", body, format="json")
    assert "serve_config" in _fields(response)


def test_another_tenants_service_is_a_404(as_user: Any, bob: Any, charlie: Any) -> None:
    assert as_user(bob).post(SERVICES, _body(), format="json").status_code == 201
    other = as_user(charlie)
    assert other.get(SERVICES + "sd/").status_code == 404
    assert other.patch(SERVICES + "sd/", {"image": "x"}, format="json").status_code == 404
    assert other.delete(SERVICES + "sd/").status_code == 404


def test_upgrading_a_queued_service_changes_its_row_and_tells_it(as_user: Any, bob: Any) -> None:
    api = as_user(bob)
    assert api.post(SERVICES, _body(), format="json").status_code == 201
    bad = api.patch(SERVICES + "sd/", {"serve_config": "nope"}, format="json")
    assert "serve_config" in _fields(bad)
    assert Service.objects.get().serve_config == STABLE_DIFFUSION
    unknown = api.patch(SERVICES + "sd/", {"workers": 3}, format="json")
    assert unknown.status_code == 400
    response = api.patch(SERVICES + "sd/", {"serve_config": AUTOSCALING}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["service"]["serve_config"] == AUTOSCALING
    assert any(e["reason"] == "upgrade" for e in response.json()["events"])
    # A service is not a cluster or a job: the other kinds' lists leave it out.
    assert api.get("/api/v1/tenants/acme/jobs/").json()["results"] == []
    assert api.get("/api/v1/tenants/acme/clusters/").json()["results"] == []
