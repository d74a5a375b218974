"""``priority_class`` on create (clusters, jobs, services): the default class when none
is named, the named one when the tenant may use it, a clear 400 that writes nothing
otherwise; preempting classes are for tenant admins; the class shows in the answers."""

from __future__ import annotations

from typing import Any

import pytest

from clusters.models import ClusterRequest
from tenants.models import AuditEvent, PriorityClass

pytestmark = pytest.mark.django_db

CLUSTERS = "/api/v1/tenants/acme/clusters/"
JOBS = "/api/v1/tenants/acme/jobs/"
SERVICES = "/api/v1/tenants/acme/services/"
SERVE_CONFIG = """applications:
- name: app
  import_path: app:deployment
  deployments:
  - name: Model
    num_replicas: 1
"""


@pytest.fixture
def classes(acme: Any, globex: Any) -> dict[str, PriorityClass]:
    """normal (default, open), urgent (may preempt, open), globex-only (globex only)."""
    PriorityClass.objects.all().delete()
    made = {
        "normal": PriorityClass.objects.create(name="normal", value=0, is_default=True),
        "high": PriorityClass.objects.create(name="high", value=100),
        "urgent": PriorityClass.objects.create(name="urgent", value=1000, may_preempt=True),
        "globex-only": PriorityClass.objects.create(name="globex-only", value=50),
    }
    made["globex-only"].tenants.set([globex])
    return made


def test_a_request_that_names_none_gets_the_default_class(
    as_user: Any, bob: Any, classes: Any
) -> None:
    made = as_user(bob).post(CLUSTERS, {"flavor": "l4"}, format="json")
    assert made.status_code == 201, made.content
    assert made.json()["priority_class"] == "normal"
    assert ClusterRequest.objects.get().priority_class == classes["normal"]
    listed = as_user(bob).get(CLUSTERS).json()["results"]
    assert listed[0]["priority_class"] == "normal"
    queue = as_user(bob).get("/api/v1/tenants/acme/queue/").json()
    rows = queue["results"] if isinstance(queue, dict) else queue
    assert [r["priority_class"] for r in rows] == ["normal"]


def test_with_no_class_at_all_a_request_has_none(as_user: Any, bob: Any, acme: Any) -> None:
    PriorityClass.objects.all().delete()
    made = as_user(bob).post(CLUSTERS, {"flavor": "l4"}, format="json")
    assert made.status_code == 201, made.content
    assert made.json()["priority_class"] is None


@pytest.mark.parametrize(
    ("path", "extra"),
    [
        (CLUSTERS, {}),
        (JOBS, {"entrypoint": "python train.py"}),
        (SERVICES, {"serve_config": SERVE_CONFIG}),
    ],
)
def test_each_kind_takes_a_class_its_tenant_may_use(
    as_user: Any, bob: Any, classes: Any, path: str, extra: dict[str, Any]
) -> None:
    made = as_user(bob).post(
        path, {"name": "pc", "flavor": "l4", "priority_class": "high", **extra}, format="json"
    )
    assert made.status_code == 201, made.content
    assert made.json()["priority_class"] == "high"
    assert ClusterRequest.objects.get(name="pc").priority_class == classes["high"]


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("nope", "No priority class 'nope'; the classes are urgent, high, globex-only, normal"),
        ("globex-only", "acme may not use priority class globex-only; it may use: urgent, high"),
        ("urgent", "Priority class urgent may preempt other requests: only the tenant's admins"),
        (7, "No priority class '7'"),
        # PostgreSQL refuses a NUL in a query: refused before asking it, not a 500.
        ("hi\x00gh", "No priority class 'hi"),
    ],
)
@pytest.mark.parametrize("path", [CLUSTERS, CLUSTERS + "dry-run/", JOBS])
def test_a_class_the_engineer_may_not_pick_is_a_400_that_writes_nothing(
    as_user: Any, bob: Any, classes: Any, name: Any, words: str, path: str
) -> None:
    body: dict[str, Any] = {"flavor": "l4", "priority_class": name}
    if path == JOBS:
        body["entrypoint"] = "python train.py"
    refused = as_user(bob).post(path, body, format="json")
    assert refused.status_code == 400, refused.content
    assert words in str(refused.json()["error"]["fields"]["priority_class"])
    assert not ClusterRequest.objects.exists()
    assert not AuditEvent.objects.exists()


def test_a_tenant_admin_may_pick_a_preempting_class(as_user: Any, alice: Any, classes: Any) -> None:
    made = as_user(alice).post(
        CLUSTERS, {"flavor": "l4", "priority_class": "urgent"}, format="json"
    )
    assert made.status_code == 201, made.content
    assert made.json()["priority_class"] == "urgent"


def test_a_class_in_use_cannot_be_deleted(as_user: Any, bob: Any, root: Any, classes: Any) -> None:
    assert (
        as_user(bob)
        .post(CLUSTERS, {"flavor": "l4", "priority_class": "high"}, format="json")
        .status_code
        == 201
    )
    refused = as_user(root).delete("/api/v1/platform/priority-classes/high/")
    assert refused.status_code == 409, refused.content
    assert "used by 1 live request(s)" in refused.json()["error"]["message"]
    assert PriorityClass.objects.filter(name="high").exists()
    # Once the request is over, the class can go; the finished row forgets it.
    ClusterRequest.objects.update(state="deleted")
    assert as_user(root).delete("/api/v1/platform/priority-classes/high/").status_code == 204
    assert ClusterRequest.objects.get().priority_class is None
