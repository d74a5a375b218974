"""The cohort tree through the API: set a parent, see roots and tenants, refuse loops."""

from __future__ import annotations

from typing import Any

from tenants.models import AuditEvent, Cohort
from tenants.selectors import cohort_parents


def test_a_parent_joins_two_cohorts_under_one_root(
    as_user: Any, root: Any, acme: Any, globex: Any
) -> None:
    acme.cohort, globex.cohort = "research", "serving"
    acme.save(update_fields=["cohort"])
    globex.save(update_fields=["cohort"])
    client = as_user(root)
    made = client.put("/api/v1/cohorts/research/", {"parent": "org"}, format="json")
    assert made.status_code == 201, made.json()
    assert made.json() == {
        "name": "research",
        "parent": "org",
        "root": "org",
        "description": "",
        "tenants": ["acme"],
        "defined": True,
    }
    changed = client.put(
        "/api/v1/cohorts/serving/", {"parent": "org", "description": "Inference"}, format="json"
    )
    assert changed.status_code == 201
    again = client.put("/api/v1/cohorts/serving/", {"parent": "org"}, format="json")
    assert again.status_code == 200
    assert again.json()["description"] == "Inference"  # omitted: unchanged
    assert cohort_parents() == {"research": "org", "serving": "org"}
    listed = {c["name"]: c for c in client.get("/api/v1/cohorts/").json()["results"]}
    assert set(listed) == {"org", "research", "serving"}
    assert listed["org"] == {
        "name": "org",
        "parent": None,
        "root": "org",
        "description": "",
        "tenants": [],
        "defined": False,
    }
    assert listed["serving"]["tenants"] == ["globex"]
    assert AuditEvent.objects.filter(action__startswith="cohort.").count() == 3


def test_a_parent_that_closes_a_loop_is_refused_and_changes_nothing(
    as_user: Any, root: Any
) -> None:
    client = as_user(root)
    assert client.put("/api/v1/cohorts/a/", {"parent": "b"}, format="json").status_code == 201
    assert client.put("/api/v1/cohorts/b/", {"parent": "c"}, format="json").status_code == 201
    refused = client.put("/api/v1/cohorts/c/", {"parent": "a"}, format="json")
    assert refused.status_code == 400
    assert refused.json()["error"]["fields"]["parent"] == [
        "a is below c in the cohort tree: c -> a -> b -> c."
    ]
    itself = client.put("/api/v1/cohorts/a/", {"parent": "a"}, format="json")
    assert itself.status_code == 400
    assert cohort_parents() == {"a": "b", "b": "c"}
    assert not Cohort.objects.filter(name="c").exists()


def test_bad_input_is_a_clear_400(as_user: Any, root: Any) -> None:
    client = as_user(root)
    bad = client.put("/api/v1/cohorts/a/", {"parent": "Not A Label"}, format="json")
    assert bad.status_code == 400
    assert "parent" in bad.json()["error"]["fields"]
    unknown = client.put("/api/v1/cohorts/a/", {"parent": "b", "colour": "red"}, format="json")
    assert unknown.status_code == 400
    assert not Cohort.objects.exists()


def test_removing_a_row_makes_the_cohort_a_root_again(as_user: Any, root: Any) -> None:
    client = as_user(root)
    client.put("/api/v1/cohorts/research/", {"parent": "org"}, format="json")
    assert client.delete("/api/v1/cohorts/research/").status_code == 204
    assert cohort_parents() == {}
    assert client.delete("/api/v1/cohorts/research/").status_code == 404
    assert client.get("/api/v1/cohorts/research/").status_code == 404  # nothing names it
