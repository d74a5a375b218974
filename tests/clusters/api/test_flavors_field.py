"""``flavors`` on create and dry-run (clusters and jobs): refusals write nothing; a
request reads back with its accepted flavors; the dry-run names the flavor it would get."""

from __future__ import annotations

import json
from typing import Any

import pytest

from clusters.models import ClusterRequest
from tenants.models import AuditEvent, Quota

pytestmark = pytest.mark.django_db

CLUSTERS = "/api/v1/tenants/acme/clusters/"
JOBS = "/api/v1/tenants/acme/jobs/"


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({"flavors": []}, "flavors", "at least one"),
        ({"flavors": ["h100", "nope"]}, "flavors", "choose one of: h100, l4"),
        ({"flavors": ["h100", "l4", "h100"]}, "flavors", "h100 appears twice"),
        ({"flavors": ["h100", "l4", "a", "b", "c"]}, "flavors", "at most 4"),
        ({"flavor": "h100", "flavors": ["l4"]}, "flavors", "not both"),
        ({"flavors": "h100"}, "flavors", "list"),
        ({"workers": 1}, "flavor", "flavors"),
    ],
)
@pytest.mark.parametrize("path", [CLUSTERS, CLUSTERS + "dry-run/", JOBS, JOBS + "dry-run/"])
def test_a_bad_flavors_list_is_a_400_naming_the_field_and_writes_nothing(
    as_user: Any, bob: Any, body: dict[str, Any], field: str, words: str, path: str
) -> None:
    if path.startswith(JOBS):
        body = {**body, "entrypoint": "python train.py"}
    response = as_user(bob).post(path, body, format="json")
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert field in error["fields"], error
    assert words in str(error["fields"][field]), error
    assert ClusterRequest.objects.count() == 0
    assert AuditEvent.objects.count() == 0


def test_a_flavor_that_could_never_take_it_refuses_the_request(
    as_user: Any, bob: Any, acme: Any, l4: Any
) -> None:
    # acme has no l4 quota: a request accepting h100 or l4 is refused, naming l4.
    Quota.objects.filter(tenant=acme, flavor=l4).delete()
    response = as_user(bob).post(CLUSTERS, {"flavors": ["h100", "l4"]}, format="json")
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "never_fits"
    assert "On l4: acme has no quota on l4." in str(error), error
    assert ClusterRequest.objects.count() == 0
    # The dry-run says the same, as a verdict.
    verdict = as_user(bob).post(CLUSTERS + "dry-run/", {"flavors": ["h100", "l4"]}, format="json")
    assert verdict.status_code == 200
    assert verdict.json()["verdict"] == "never_fits"


def test_a_shape_one_flavor_cannot_take_is_refused_naming_it(as_user: Any, alice: Any) -> None:
    # Five whole-node workers fit neither four h100 nodes nor four l4 nodes: each
    # flavor's fault is named (the first preference's as always, the others prefixed).
    body = {"kind": "prod", "workers": 5, "flavors": ["h100", "l4"]}
    response = as_user(alice).post(CLUSTERS, body, format="json")
    assert response.status_code == 400, response.content
    workers = response.json()["error"]["fields"]["workers"]
    assert len(workers) == 2 and workers[1].startswith("On l4: 5 whole-node workers"), workers
    assert ClusterRequest.objects.count() == 0


def test_create_and_read_back(as_user: Any, bob: Any) -> None:
    api = as_user(bob)
    body = {"name": "either", "flavors": ["l4", "h100"], "workers": 1}
    response = api.post(CLUSTERS, body, format="json")
    assert response.status_code == 201, response.content
    out = response.json()
    assert out["flavor"] == "l4"  # the first preference while it waits
    assert out["flavors"] == ["l4", "h100"]
    row = ClusterRequest.objects.get(name="either")
    assert row.accepted_flavors == ["l4", "h100"]
    assert row.flavor.name == "l4"
    detail = api.get(CLUSTERS + "either/").json()
    assert detail["flavors"] == ["l4", "h100"]
    assert detail["queue"]["flavors"] == []  # no pass yet
    # ``flavor: x`` still works and means ``flavors: [x]``.
    single = api.post(CLUSTERS, {"name": "one", "flavor": "h100"}, format="json").json()
    assert single["flavors"] == ["h100"]
    assert ClusterRequest.objects.get(name="one").accepted_flavors == ["h100"]


def test_a_job_accepts_flavors(as_user: Any, bob: Any) -> None:
    body = {"name": "train", "entrypoint": "python train.py", "flavors": ["h100", "l4"]}
    response = as_user(bob).post(JOBS, body, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["flavors"] == ["h100", "l4"]
    assert ClusterRequest.objects.get(name="train").accepted_flavors == ["h100", "l4"]


def test_dry_run_says_which_flavor_it_would_get(
    as_user: Any, bob: Any, acme: Any, h100: Any
) -> None:
    api = as_user(bob)
    verdict = api.post(CLUSTERS + "dry-run/", {"flavors": ["h100", "l4"]}, format="json").json()
    assert verdict["verdict"] == "fits_now"
    assert verdict["flavor"] == "h100"
    # With acme's h100 quota gone to zero... it still may borrow 8; take that away too.
    Quota.objects.filter(tenant=acme, flavor=h100).update(gpus=0, borrow_limit=0)
    verdict = api.post(CLUSTERS + "dry-run/", {"flavors": ["h100", "l4"]}, format="json").json()
    # h100 can now never fit: refused as a whole (see the docs' choice).
    assert verdict["verdict"] == "never_fits"
    Quota.objects.filter(tenant=acme, flavor=h100).update(gpus=1, borrow_limit=0)
    api.post(CLUSTERS, {"name": "hog", "flavor": "h100"}, format="json")
    from clusters.queue.admission_pass import run_admission_pass

    run_admission_pass()  # hog holds acme's only h100
    verdict = api.post(CLUSTERS + "dry-run/", {"flavors": ["h100", "l4"]}, format="json").json()
    assert verdict["verdict"] == "fits_now"
    assert verdict["flavor"] == "l4"
    (manifest,) = verdict["manifests"]
    worker = manifest["spec"]["workerGroupSpecs"][0]["template"]["spec"]
    assert worker["nodeSelector"]["nvidia.com/gpu.product"] == "NVIDIA-L4"
    assert ClusterRequest.objects.count() == 1


@pytest.mark.parametrize("path", [CLUSTERS, CLUSTERS + "dry-run/", JOBS, JOBS + "dry-run/"])
def test_the_flavor_read_with_the_tenant_answers_as_the_catalogue(
    as_user: Any, bob: Any, charlie: Any, path: str
) -> None:
    """A create's flavor comes with its tenant's query: an unknown one is still refused
    naming the catalogue, a body that does not parse is a 400, and a tenant the caller
    is no member of is a 404 whatever the body."""
    extra = {"entrypoint": "python train.py"} if path.startswith(JOBS) else {}
    unknown = as_user(bob).post(path, {"flavor": "nope", **extra}, format="json")
    assert unknown.status_code == 400, unknown.content
    assert "choose one of: h100, l4" in str(unknown.json()["error"]["fields"]["flavor"])
    garbled = as_user(bob).generic("POST", path, "{not json", content_type="application/json")
    assert garbled.status_code == 400, garbled.content
    good = json.dumps({"flavor": "h100", **extra})
    outsider = as_user(charlie).generic("POST", path, good, content_type="application/json")
    assert outsider.status_code == 404, outsider.content
    # A body that does not parse is a 400 before the tenant is looked at, for a tenant
    # the caller may not see as for one that does not exist: neither tells them apart.
    for slug in ("acme", "no-such-tenant"):
        where = path.replace("/acme/", f"/{slug}/")
        said = as_user(charlie).generic("POST", where, "{not json", content_type="application/json")
        assert said.status_code == 400, said.content
    assert not ClusterRequest.objects.exists()
