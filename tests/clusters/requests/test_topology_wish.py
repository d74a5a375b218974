"""A production gang may ask that all its workers share one domain of a level of its
flavor's topology (docs/topology.md): every kind takes it through the API and shows it;
a dev cluster, a level the flavor lacks, or a mode without a level are refused with a
400 naming the field, and nothing is created."""

from __future__ import annotations

from typing import Any

import pytest

from clusters.models import ClusterRequest
from tests.clusters.kinds.rayservice.samples import STABLE_DIFFUSION

pytestmark = pytest.mark.django_db

RACK = "network.topology.kubernetes.io/rack"
BLOCK = "network.topology.kubernetes.io/block"
CLUSTERS = "/api/v1/tenants/acme/clusters/"
JOBS = "/api/v1/tenants/acme/jobs/"
SERVICES = "/api/v1/tenants/acme/services/"


@pytest.fixture(autouse=True)
def _racks(h100: Any) -> None:
    h100.topology = [BLOCK, RACK]
    h100.save()


@pytest.mark.parametrize(
    ("url", "extra"),
    [
        (CLUSTERS, {}),
        (JOBS, {"entrypoint": "python train.py"}),
        (SERVICES, {"serve_config": STABLE_DIFFUSION}),
    ],
)
def test_every_kind_takes_a_level_and_shows_it_required_by_default(
    as_user: Any, alice: Any, url: str, extra: dict[str, Any]
) -> None:
    body = {"name": "train", "flavor": "h100", "kind": "prod", "workers": 2, **extra}
    created = as_user(alice).post(url, {**body, "topology_level": RACK}, format="json")
    assert created.status_code == 201, created.content
    row = ClusterRequest.objects.get(name="train")
    assert (row.topology_level, row.topology_mode) == (RACK, "required")
    shown = as_user(alice).get(f"{url}train/").json()
    assert (shown["topology_level"], shown["topology_mode"]) == (RACK, "required")


def test_a_preferred_level_is_kept_as_asked(as_user: Any, alice: Any) -> None:
    body = {"name": "p", "flavor": "h100", "kind": "prod", "workers": 2}
    body |= {"topology_level": BLOCK, "topology_mode": "preferred"}
    assert as_user(alice).post(CLUSTERS, body, format="json").status_code == 201
    assert ClusterRequest.objects.get(name="p").topology_mode == "preferred"


@pytest.mark.parametrize(
    ("asked", "field", "words"),
    [
        ({"kind": "dev", "topology_level": RACK}, "topology_level", "Only a production"),
        (
            {"topology_level": "nvidia.com/gpu.clique"},
            "topology_level",
            f"h100 has no topology level 'nvidia.com/gpu.clique' (its levels, coarse to fine: "
            f"{BLOCK}, {RACK})",
        ),
        ({"topology_mode": "required"}, "topology_mode", "Name the level"),
        ({"topology_level": RACK, "topology_mode": "always"}, "topology_mode", "not a valid"),
    ],
)
def test_a_level_that_cannot_be_kept_is_a_400_that_creates_nothing(
    as_user: Any, alice: Any, asked: dict[str, str], field: str, words: str
) -> None:
    body = {"name": "x", "flavor": "h100", "kind": "prod", "workers": 2, **asked}
    response = as_user(alice).post(CLUSTERS, body, format="json")
    assert response.status_code == 400, response.content
    assert words in " ".join(response.json()["error"]["fields"][field])
    assert not ClusterRequest.objects.filter(name="x").exists()
