"""tenants.services.cohorts: the cohort tree set by platform admins; it stays a tree."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ValidationError

from tenants.models import AuditEvent, Cohort
from tenants.selectors import cohort_parents
from tenants.services import cohort_delete, cohort_set


def test_cohorts_are_created_then_changed_each_change_audited(root: Any) -> None:
    cohort_set(actor=root, name="research", parent="org", description="labs")
    cohort_set(actor=root, name="research", parent="")
    row = Cohort.objects.get(name="research")
    assert row.parent == "" and row.description == "labs"
    update = AuditEvent.objects.get(action="cohort.update")
    assert update.data == {
        "before": {"parent": "org", "description": "labs"},
        "after": {"parent": "", "description": "labs"},
    }


def test_a_parent_that_would_close_a_loop_is_refused_naming_the_loop(root: Any) -> None:
    cohort_set(actor=root, name="b", parent="a")
    cohort_set(actor=root, name="c", parent="b")
    with pytest.raises(ValidationError) as refused:
        cohort_set(actor=root, name="a", parent="c")
    assert "a -> c -> b -> a" in str(refused.value.message_dict["parent"])
    assert cohort_parents() == {"b": "a", "c": "b"}


def test_removing_a_cohorts_row_makes_it_a_root(root: Any) -> None:
    cohort = cohort_set(actor=root, name="b", parent="a")
    cohort_delete(actor=root, cohort=cohort)
    assert cohort_parents() == {}
    assert AuditEvent.objects.filter(action="cohort.delete").count() == 1
