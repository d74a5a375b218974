"""The dry-run and manifests endpoints: JSON and YAML output, refusals, nothing written."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest
import yaml
from django.utils import timezone

from clusters.models import ClusterRequest
from tenants.models import AuditEvent

DRY_RUN = "/api/v1/tenants/acme/clusters/dry-run/"


def test_dry_run_returns_the_manifests(as_user: Any, bob: Any) -> None:
    response = as_user(bob).post(DRY_RUN, {"flavor": "h100", "workers": 2}, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    # acme has 16 H100s of its own and holds none: a 2-worker dev cluster starts now.
    assert body["verdict"] == "fits_now" and body["reasons"] == [] and body["eta"] is None
    # When the queue was read: now, for a queue this small (read afresh each time).
    as_of = datetime.fromisoformat(body["as_of"])
    assert abs((timezone.now() - as_of).total_seconds()) < 30
    (obj,) = body["manifests"]
    assert obj["kind"] == "RayCluster"
    assert obj["metadata"]["namespace"] == "gw-acme"
    assert obj["spec"]["workerGroupSpecs"][0]["replicas"] == 2
    assert ClusterRequest.objects.count() == 0
    assert AuditEvent.objects.count() == 0


@pytest.mark.parametrize("how", ["query", "accept"])
def test_dry_run_as_yaml(as_user: Any, bob: Any, how: str) -> None:
    client = as_user(bob)
    body = {"flavor": "h100", "name": "bob-yaml"}
    if how == "query":
        response = client.post(DRY_RUN + "?format=yaml", body, format="json")
    else:
        response = client.post(DRY_RUN, body, format="json", HTTP_ACCEPT="application/yaml")
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("application/yaml")
    text = response.content.decode()
    assert text.startswith("---\n")
    (obj,) = list(yaml.safe_load_all(text))
    assert obj["metadata"]["name"] == "bob-yaml"
    json_body = client.post(DRY_RUN, body, format="json").json()
    assert [obj] == json_body["manifests"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"flavor": "nope"}, "flavor"),
        ({"flavor": "h100", "workers": 33}, "workers"),
        ({"flavor": "l4", "gpu_fraction": "0.5"}, "gpu_fraction"),  # KAI is off
        ({"flavor": "h100", "min_workers": 1}, "min_workers"),  # no autoscaling for dev
        ({"flavor": "h100", "name": "Bob_Cluster"}, "name"),
        ({"flavor": "h100", "name": "dry-run"}, "name"),
        ({"flavor": "h100", "ttl_hours": 1000}, "ttl_hours"),
        ({"flavor": "h100", "max_worker": 3}, "max_worker"),  # unknown field
        ({"flavor": "h100", "kind": "huge"}, "kind"),
    ],
)
def test_bad_requests_are_400_with_field_errors(
    as_user: Any, bob: Any, body: dict[str, Any], field: str
) -> None:
    response = as_user(bob).post(DRY_RUN, body, format="json")
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "invalid"
    assert field in error["fields"], error
    assert ClusterRequest.objects.count() == 0


def test_prod_refusals_for_admins(as_user: Any, alice: Any) -> None:
    client = as_user(alice)
    for body, field in [
        ({"kind": "prod", "flavor": "h100", "workers": 3, "min_workers": 4}, "min_workers"),
        ({"kind": "prod", "flavor": "h100", "workers": 2, "max_workers": 5}, "max_workers"),
        ({"kind": "prod", "flavor": "l4", "gpu_fraction": "0.5"}, "gpu_fraction"),
    ]:
        response = client.post(DRY_RUN, body, format="json")
        assert response.status_code == 400, body
        assert field in response.json()["error"]["fields"]
        assert "never fit" in str(response.json()) or field != "max_workers"


def test_prod_needs_a_tenant_admin(as_user: Any, bob: Any, alice: Any) -> None:
    body = {"kind": "prod", "flavor": "h100", "workers": 2}
    assert as_user(bob).post(DRY_RUN, body, format="json").status_code == 403
    response = as_user(alice).post(DRY_RUN, body, format="json")
    assert response.status_code == 200
    limits = response.json()["manifests"][0]["spec"]["workerGroupSpecs"][0]["template"]["spec"][
        "containers"
    ][0]["resources"]["limits"]
    assert limits["nvidia.com/gpu"] == "8"


def test_fraction_with_kai(as_user: Any, bob: Any, settings: Any) -> None:
    settings.KAI_ENABLED = True
    response = as_user(bob).post(DRY_RUN, {"flavor": "l4", "gpu_fraction": "0.25"}, format="json")
    assert response.status_code == 200, response.content
    template = response.json()["manifests"][0]["spec"]["workerGroupSpecs"][0]["template"]
    assert template["metadata"]["annotations"] == {"gpu-fraction": "0.25"}


def test_other_tenants_and_viewers(as_user: Any, charlie: Any, vera: Any) -> None:
    body = {"flavor": "h100"}
    assert as_user(charlie).post(DRY_RUN, body, format="json").status_code == 404
    assert as_user(vera).post(DRY_RUN, body, format="json").status_code == 403
    assert as_user(None).post(DRY_RUN, body, format="json").status_code == 401


def test_manifests_of_an_existing_cluster(
    as_user: Any, make_cluster: Any, vera: Any, charlie: Any
) -> None:
    cluster = make_cluster(name="bob-saved", workers=2)
    cluster.save()
    url = "/api/v1/tenants/acme/clusters/bob-saved/manifests/"
    response = as_user(vera).get(url)
    assert response.status_code == 200, response.content
    (obj,) = response.json()["manifests"]
    assert obj["metadata"]["labels"]["gangway.dev/cluster-id"] == str(cluster.pk)
    text = as_user(vera).get(url + "?format=yaml").content.decode()
    assert list(yaml.safe_load_all(text)) == [obj]
    assert as_user(charlie).get(url).status_code == 404
    assert as_user(vera).get("/api/v1/tenants/acme/clusters/missing/manifests/").status_code == 404
    cluster.state = "deleted"
    cluster.save()
    assert as_user(vera).get(url).status_code == 404


def test_a_production_verdict_says_the_nodes_and_gpus_charged(as_user: Any, alice: Any) -> None:
    body = {"kind": "prod", "flavor": "h100", "workers": 2}
    verdict = as_user(alice).post(DRY_RUN, body, format="json").json()
    assert verdict["verdict"] == "fits_now"
    assert verdict["headline"] == "Fits now on h100: 2 whole nodes, 16 GPUs charged."
    # L4 nodes hold one GPU each: the same two workers take two nodes there.
    assert verdict["summary"] == (
        "Starts on h100 now (2 whole nodes, 16 GPUs charged), "
        "or on l4 now (2 whole nodes, 2 GPUs charged)."
    )
    assert verdict["alternatives"][0]["message"] == "fits now (2 whole nodes, 2 GPUs charged)"


@pytest.mark.parametrize(
    ("ttl", "message"),
    [
        (0, "A whole number of hours from 1 to 72 (the tenant's maximum TTL)."),
        (73, "A whole number of hours from 1 to 72 (the tenant's maximum TTL)."),
        (1.5, "Must be a whole number (a JSON integer)."),
    ],
)
def test_the_verdict_refuses_a_ttl_as_create_does(
    as_user: Any, bob: Any, ttl: Any, message: str
) -> None:
    body = {"flavor": "h100", "workers": 1, "ttl_hours": ttl}
    verdict = as_user(bob).post(DRY_RUN, body, format="json")
    create = as_user(bob).post("/api/v1/tenants/acme/clusters/", body, format="json")
    assert verdict.status_code == create.status_code == 400
    assert verdict.json()["error"]["fields"] == create.json()["error"]["fields"]
    assert verdict.json()["error"]["fields"] == {"ttl_hours": [message]}
    assert ClusterRequest.objects.count() == 0
