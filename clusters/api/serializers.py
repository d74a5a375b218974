"""Input serializers of the clusters API: the create body of DESIGN, used by dry-run too."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import serializers

from clusters import shapes
from clusters.models import ClusterKind
from tenants.models import GpuFlavor


class ClusterCreateInput(serializers.Serializer):
    """``{name?, kind, flavor, workers, min_workers, max_workers, gpu_fraction, ttl_hours}``.

    Unknown fields are refused (a typo like ``max_worker`` must not silently create a
    fixed-size cluster). The shape rules live in :func:`shapes.validate_request`; this
    serializer only parses, resolves the flavor by name and maps errors to fields. The
    tenant comes from the URL, never from the body: pass it in ``context["tenant"]``.
    """

    name = serializers.CharField(required=False, allow_blank=False, max_length=253)
    kind = serializers.ChoiceField(choices=ClusterKind.choices, default=ClusterKind.DEV)
    flavor = serializers.SlugRelatedField(slug_field="name", queryset=GpuFlavor.objects.all())
    workers = serializers.IntegerField(default=1, min_value=0, max_value=1024)
    min_workers = serializers.IntegerField(
        required=False, allow_null=True, default=None, min_value=0, max_value=1024
    )
    max_workers = serializers.IntegerField(
        required=False,
        allow_null=True,
        default=None,
        min_value=0,
        max_value=1024,
        help_text="Production only: autoscale up to this many workers. The cluster is "
        "charged against the quota for all of them, so it can never grow past it.",
    )
    gpu_fraction = serializers.DecimalField(
        max_digits=4, decimal_places=3, required=False, allow_null=True, default=None
    )
    ttl_hours = serializers.IntegerField(
        required=False, allow_null=True, default=None, min_value=1, max_value=24 * 365
    )

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError({field: ["Unknown field."] for field in unknown})
        return super().to_internal_value(data)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        tenant = self.context["tenant"]
        fraction: Decimal | None = attrs.get("gpu_fraction")
        try:
            shapes.validate_request(
                tenant=tenant,
                flavor=attrs["flavor"],
                kind=attrs["kind"],
                workers=attrs["workers"],
                min_workers=attrs.get("min_workers"),
                max_workers=attrs.get("max_workers"),
                gpu_fraction=fraction,
                ttl_hours=attrs.get("ttl_hours"),
                name=attrs.get("name"),
                image=None,
                kai_enabled=self.context.get("kai_enabled", settings.KAI_ENABLED),
                kueue=settings.QUEUE_MODE == "kueue",
            )
        except DjangoValidationError as exc:
            raise serializers.ValidationError(exc.message_dict) from exc
        return attrs


class ManifestsOutput(serializers.Serializer):
    """``{"manifests": [...]}``: Kubernetes objects as plain JSON (or YAML, see renderers)."""

    manifests = serializers.ListField(child=serializers.DictField())


class DryRunOutput(ManifestsOutput):
    """What a create would do: the verdict (admission's), its reasons and ETA, the objects."""

    verdict = serializers.ChoiceField(choices=["fits_now", "will_queue", "never_fits"])
    reasons = serializers.ListField(child=serializers.DictField(child=serializers.CharField()))
    summary = serializers.CharField()
    position = serializers.IntegerField(allow_null=True)
    flavor_position = serializers.IntegerField(allow_null=True)
    eta = serializers.DateTimeField(allow_null=True)
    eta_text = serializers.CharField()
    alternatives = serializers.ListField(child=serializers.DictField())
