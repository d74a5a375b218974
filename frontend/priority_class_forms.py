"""The platform admin's form for a priority class (docs/preemption.md)."""

from __future__ import annotations

from typing import Any

from django import forms

from tenants.models import PriorityClass, Tenant


class PriorityClassForm(forms.Form):
    """Add a class, or change the one of that name (its name is fixed once made). The
    service checks the rest: clashes with other classes, a second default."""

    name = forms.CharField(
        max_length=40, help_text="Lowercase letters, digits and dashes; fixed once created."
    )
    value = forms.IntegerField(
        min_value=-1_000_000,
        max_value=1_000_000,
        help_text="Higher goes first; each class has its own value.",
    )
    description = forms.CharField(max_length=200, required=False)
    may_preempt = forms.BooleanField(
        required=False,
        label="May preempt",
        help_text="Its waiting requests may take lower classes' running requests off their "
        "GPUs, after notice. Only tenant admins pick such a class.",
    )
    min_run_seconds = forms.IntegerField(
        min_value=0, initial=0, label="Minimum run (seconds)", help_text="Not preempted before."
    )
    checkpoint_grace_seconds = forms.IntegerField(
        min_value=0,
        initial=0,
        label="Checkpoint grace (seconds)",
        help_text="Nor within this long after its last checkpoint.",
    )
    notice_seconds = forms.IntegerField(
        min_value=0,
        max_value=86_400,
        required=False,
        label="Notice (seconds)",
        help_text="Between the preemption notice and the stop (empty: the platform's "
        "reclaim grace).",
    )
    is_default = forms.BooleanField(
        required=False, label="Default", help_text="The class of requests that name none."
    )
    tenants = forms.ModelMultipleChoiceField(
        queryset=Tenant.objects.none(),
        to_field_name="slug",
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="The tenants that may pick it; none ticked: every tenant.",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["tenants"].queryset = Tenant.objects.unscoped().order_by("slug")  # type: ignore[attr-defined]


def initial_of(pc: PriorityClass) -> dict[str, Any]:
    """The form filled with a class, to edit it."""
    return {
        "name": pc.name,
        "value": pc.value,
        "description": pc.description,
        "may_preempt": pc.may_preempt,
        "min_run_seconds": pc.min_run_seconds,
        "checkpoint_grace_seconds": pc.checkpoint_grace_seconds,
        "notice_seconds": pc.notice_seconds,
        "is_default": pc.is_default,
        "tenants": [t.slug for t in pc.tenants.all()],
    }
