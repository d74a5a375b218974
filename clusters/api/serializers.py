"""Input serializers of the clusters API: the create body of DESIGN, used by dry-run too."""

from __future__ import annotations

from typing import Any, NoReturn

from rest_framework import serializers

from clusters import shapes
from clusters.models import ClusterKind
from controlplane.api import generics as drf
from tenants.models import GpuFlavor
from tenants.selectors import unknown_flavor_message


class FlavorField(drf.SlugRelatedField):
    """A GPU flavor by name; an unknown name is refused naming the flavors there are."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(slug_field="name", queryset=GpuFlavor.objects.all(), **kwargs)

    def fail(self, key: str, **kwargs: Any) -> NoReturn:
        if key == "does_not_exist":
            raise serializers.ValidationError(
                unknown_flavor_message(str(kwargs.get("value", ""))), code=key
            )
        super().fail(key, **kwargs)
        raise AssertionError("unreachable")  # fail() always raises


class ClusterCreateInput(drf.Serializer):
    """``{name?, kind, flavor, workers, min_workers, max_workers, gpu_fraction, ttl_hours}``.

    Unknown fields are refused (a typo like ``max_worker`` must not silently create a
    fixed-size cluster). This serializer only parses and resolves the flavor by name:
    every rule (shape, name, policy, caps) is checked once, by
    :func:`clusters.requests.services.cluster_request_check`, which create and dry-run both call,
    so that the two report a request's faults alike and all at once.
    """

    name = serializers.CharField(required=False, allow_blank=False, max_length=253)
    kind = serializers.ChoiceField(choices=ClusterKind.choices, default=ClusterKind.DEV)
    flavor = FlavorField()
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
        required=False,
        allow_null=True,
        default=None,
        min_value=shapes.MIN_HOURS,
        max_value=shapes.MAX_HOURS,
    )

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError({field: ["Unknown field."] for field in unknown})
        return super().to_internal_value(data)


class ManifestsOutput(drf.Serializer):
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
