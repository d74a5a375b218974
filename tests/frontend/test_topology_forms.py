"""The new-request forms' "Keep workers together" inputs (issue 48): offered to those who
may ask for production when a flavor has a topology, each level tagged with the flavors
that have it; the service's refusals come back beside the inputs; what is accepted is
stored as the API stores it."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from clusters.models import ClusterRequest

pytestmark = pytest.mark.django_db

BLOCK = "network.topology.kubernetes.io/block"
RACK = "network.topology.kubernetes.io/rack"
CLIQUE = "nvidia.com/gpu.clique"
PROD = {"kind": "prod", "flavor": "h100", "workers": 2}


@pytest.fixture(autouse=True)
def _topologies(h100: Any, l4: Any) -> None:
    h100.topology = [BLOCK, RACK]
    h100.save()
    l4.topology = [CLIQUE]
    l4.save()


def client_for(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.parametrize("path", ["clusters", "jobs", "services"])
def test_the_levels_are_offered_with_the_flavors_that_have_them(alice: Any, path: str) -> None:
    page = client_for(alice).get(f"/t/acme/{path}/new/").content.decode()
    assert 'data-topology-levels="true"' in page
    assert f'<option value="{RACK}" data-flavors="h100">One rack ({RACK})</option>' in page
    assert f'<option value="{CLIQUE}" data-flavors="l4">One clique ({CLIQUE})</option>' in page
    assert 'data-shown-when="kind" data-shown-value="prod"' in page
    # Beside the shape: the level comes before the image select.
    assert page.index('name="topology_level"') < page.index('name="image"')


def test_no_inputs_for_a_dev_only_role_or_a_catalogue_without_topology(
    alice: Any, bob: Any, h100: Any, l4: Any
) -> None:
    assert (
        'name="topology_level"' not in client_for(bob).get("/t/acme/clusters/new/").content.decode()
    )
    h100.topology = []
    h100.save()
    l4.topology = []
    l4.save()
    page = client_for(alice).get("/t/acme/clusters/new/").content.decode()
    assert 'name="topology_level"' not in page and 'name="topology_mode"' not in page


def test_a_level_the_flavor_lacks_is_refused_beside_the_input(alice: Any) -> None:
    body = {**PROD, "topology_level": CLIQUE, "topology_mode": "required"}
    response = client_for(alice).post("/t/acme/clusters/new/", body)
    assert response.status_code == 400
    (message,) = response.context["form"].errors["topology_level"]
    assert message == (
        f"h100 has no topology level {CLIQUE!r} (its levels, coarse to fine: {BLOCK}, {RACK})."
    )
    html = response.content.decode()
    assert 'id="field-topology_level"' in html and "id_topology_level_errors" in html
    assert ClusterRequest.objects.count() == 0


def test_a_dev_request_with_a_level_is_refused_beside_the_input(alice: Any) -> None:
    body = {**PROD, "kind": "dev", "workers": 1, "topology_level": RACK}
    response = client_for(alice).post("/t/acme/clusters/new/", body)
    assert response.status_code == 400
    (message,) = response.context["form"].errors["topology_level"]
    assert message.startswith("Only a production cluster's whole-node workers")
    assert ClusterRequest.objects.count() == 0


def test_an_unknown_level_or_mode_is_refused_by_the_form(alice: Any) -> None:
    body = {**PROD, "topology_level": "rack", "topology_mode": "always"}
    response = client_for(alice).post("/t/acme/clusters/new/", body)
    assert response.status_code == 400
    errors = response.context["form"].errors
    assert errors["topology_level"] == ["rack is no level of any flavor's topology."]
    assert "topology_mode" in errors
    assert ClusterRequest.objects.count() == 0


@pytest.mark.parametrize(
    ("path", "extra"),
    [
        ("clusters", {}),
        ("jobs", {"entrypoint": "python train.py", "ttl_seconds_after_finished": 0}),
    ],
)
def test_a_production_request_keeps_its_level_and_mode(
    alice: Any, path: str, extra: dict[str, Any]
) -> None:
    body = {**PROD, **extra, "name": "train", "topology_level": RACK, "topology_mode": "preferred"}
    response = client_for(alice).post(f"/t/acme/{path}/new/", body)
    assert response.status_code == 302, response.content
    row = ClusterRequest.objects.get(name="train")
    assert (row.topology_level, row.topology_mode) == (RACK, "preferred")


def test_no_level_sends_no_mode(alice: Any) -> None:
    body = {**PROD, "name": "anywhere", "topology_level": "", "topology_mode": "required"}
    response = client_for(alice).post("/t/acme/clusters/new/", body)
    assert response.status_code == 302, response.content
    row = ClusterRequest.objects.get(name="anywhere")
    assert (row.topology_level, row.topology_mode) == ("", "")
