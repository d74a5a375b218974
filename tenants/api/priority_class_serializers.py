"""Bodies and answers of the priority-class endpoints (docs/preemption.md)."""

from __future__ import annotations

from typing import Any, ClassVar

from rest_framework import serializers

from controlplane.api.serializers import StrictModelSerializer
from tenants.models import PriorityClass
from tenants.services.priority_classes import PRIORITY_CLASS_FACTS

PRIORITY_CLASS_FIELDS = ["name", *PRIORITY_CLASS_FACTS]


class PriorityClassOut(serializers.ModelSerializer[PriorityClass]):
    """A platform priority class: higher ``value`` goes first; ``tenants`` may pick it
    (empty: every tenant)."""

    tenants = serializers.SerializerMethodField(
        help_text="Slugs of the tenants that may pick it (empty: every tenant)."
    )

    class Meta:
        model = PriorityClass
        fields = [*PRIORITY_CLASS_FIELDS, "tenants", "updated_at"]
        read_only_fields = fields

    def get_tenants(self, pc: PriorityClass) -> list[str]:
        return sorted(t.slug for t in pc.tenants.all())


class TenantPriorityClassOut(serializers.ModelSerializer[PriorityClass]):
    """A class the tenant's members may pick for a request."""

    class Meta:
        model = PriorityClass
        fields = PRIORITY_CLASS_FIELDS
        read_only_fields = fields


def _tenants_field() -> serializers.ListField:
    return serializers.ListField(
        child=serializers.SlugField(max_length=63),
        required=False,
        max_length=1000,
        help_text="Slugs of the tenants that may pick it (empty or omitted: every tenant).",
    )


class PriorityClassCreateIn(StrictModelSerializer):
    """Body of ``POST /platform/priority-classes/``."""

    tenants = _tenants_field()

    class Meta:
        model = PriorityClass
        fields = [*PRIORITY_CLASS_FIELDS, "tenants"]
        validators: ClassVar[list[Any]] = []
        # Uniqueness is the service's concern (it names the clashing class).
        extra_kwargs: ClassVar[dict[str, dict[str, Any]]] = {
            "name": {"validators": []},
            "value": {"validators": []},
            "is_default": {"validators": []},
        }


class PriorityClassUpdateIn(PriorityClassCreateIn):
    """Body of ``PUT``/``PATCH /platform/priority-classes/{name}/``; the name cannot
    change (a different one is a 400)."""

    class Meta(PriorityClassCreateIn.Meta):
        extra_kwargs: ClassVar[dict[str, dict[str, Any]]] = {
            **PriorityClassCreateIn.Meta.extra_kwargs,
            "name": {"validators": [], "required": False},
        }
