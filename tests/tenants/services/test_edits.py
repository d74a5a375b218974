"""tenants.services.edits: a change set applied, checked, saved and audited as one."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.db import transaction

from tenants.models import AuditEvent, GpuFlavor
from tenants.services.edits import edit_and_audit


def test_only_the_named_fields_are_saved_and_audited(root: Any, h100: Any) -> None:
    with transaction.atomic():
        edit_and_audit(
            actor=root,
            obj=h100,
            changes={"node_count": 7, "sharing": True},
            fields=["node_count"],
            check=GpuFlavor.full_clean,
            action="flavor.update",
        )
    row = GpuFlavor.objects.get(pk=h100.pk)
    assert row.node_count == 7 and row.sharing is False
    assert AuditEvent.objects.get().data["after"] == {"node_count": 7}


def test_a_failed_check_saves_and_audits_nothing(root: Any, h100: Any) -> None:
    def refuse(obj: Any) -> None:
        raise ValidationError({"node_count": ["no"]})

    with pytest.raises(ValidationError), transaction.atomic():
        edit_and_audit(
            actor=root,
            obj=h100,
            changes={"node_count": 7},
            fields=["node_count"],
            check=refuse,
            action="flavor.update",
        )
    assert GpuFlavor.objects.get(pk=h100.pk).node_count != 7
    assert not AuditEvent.objects.exists()
