"""Queue and usage endpoints: where waiting requests stand, and who used how much.

``GET /api/v1/tenants/{slug}/queue/`` (any member), ``GET /api/v1/queue/`` (platform
admins, every tenant, in flavor-queue order) and ``GET /api/v1/tenants/{slug}/usage/``
(any member; GPU-hours and their cost per user, flavor and request over a period,
default the last 30 days, and per UTC day; ``?days=7|30|90`` as the dashboard's switch).
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

from django.utils import timezone
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import mixins, permissions, serializers
from rest_framework.request import Request
from rest_framework.response import Response

from clusters import selectors
from clusters.models import ClusterRequest
from clusters.output.request import FlatModelOut, QueueFlavorOut, accepted_flavors
from clusters.rows import costs, usage
from controlplane.api import generics as drf
from tenants.api.viewsets import TenantScopedViewSet
from tenants.models import Role


class QueueEntryOut(FlatModelOut):
    """One waiting request with its place, reason and ETA."""

    tenant = serializers.CharField(source="tenant.slug")
    owner = serializers.CharField(source="owner.username")
    flavor = serializers.CharField(source="flavor.name")
    gpus = serializers.DecimalField(max_digits=10, decimal_places=3, coerce_to_string=False)
    position = serializers.IntegerField(source="queue_position", allow_null=True)
    flavor_position = serializers.IntegerField(source="queue_flavor_position", allow_null=True)
    reason = serializers.CharField(source="queue_reason")
    message = serializers.CharField(source="queue_message")
    eta = serializers.DateTimeField(source="queue_eta", allow_null=True)
    flavors = serializers.SerializerMethodField()
    priority_class = serializers.SerializerMethodField(
        help_text="Its platform priority class (null: none)."
    )
    flavor_standing = QueueFlavorOut(source="queue_flavors", many=True)

    class Meta:
        model = ClusterRequest
        fields = [
            "name",
            "tenant",
            "owner",
            "kind",
            "flavor",
            "flavors",
            "gpus",
            "priority",
            "priority_class",
            "position",
            "flavor_position",
            "reason",
            "message",
            "eta",
            "flavor_standing",
            "created_at",
        ]
        read_only_fields = fields

    @extend_schema_field(serializers.ListField(child=serializers.CharField()))
    def get_flavors(self, obj: ClusterRequest) -> list[str]:
        return accepted_flavors(obj)

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_priority_class(self, obj: ClusterRequest) -> str | None:
        return obj.priority_class.name if obj.priority_class is not None else None


class TenantQueueViewSet(mixins.ListModelMixin, TenantScopedViewSet[ClusterRequest]):
    """A tenant's waiting requests, in its queue order."""

    serializer_class = QueueEntryOut
    action_roles = {"list": Role.VIEWER}
    filter_backends: list[Any] = []
    queryset = ClusterRequest.objects.none()  # for the OpenAPI schema only

    def scoped_queryset(self, tenant: Any) -> Any:
        return selectors.queue_list(tenant=tenant)


class GlobalQueueView(drf.ListAPIView):
    """Every tenant's waiting requests (platform admins), in flavor-queue order."""

    serializer_class = QueueEntryOut
    permission_classes = [permissions.IsAdminUser]
    filter_backends: list[Any] = []

    def get_queryset(self) -> Any:
        return selectors.queue_list()


class UsageOut(drf.Serializer):
    """GPU-hours over a period."""

    tenant = serializers.CharField()
    since = serializers.DateTimeField()
    until = serializers.DateTimeField()
    total_gpu_hours = serializers.FloatField()
    active_gpu_hours = serializers.FloatField(help_text="GPU-hours while Ray showed use.")
    idle_gpu_hours = serializers.FloatField(
        help_text="GPU-hours held while Ray showed no driver or job (docs/idle.md)."
    )
    by_user = serializers.ListField(child=serializers.DictField())
    by_flavor = serializers.ListField(child=serializers.DictField())
    by_user_and_flavor = serializers.ListField(child=serializers.DictField())
    daily = serializers.ListField(
        child=serializers.DictField(),
        help_text="GPU-hours per UTC day, user and flavor (day, user, flavor, gpu_hours, "
        "active_hours, idle_hours, cost); a span crossing midnight counts on both days.",
    )
    currency = serializers.CharField(help_text="The currency of every cost (COST_CURRENCY).")
    total_cost = serializers.FloatField(
        help_text="What the GPU-hours cost at the flavor prices in force (docs/cost.md); "
        "by_user, by_flavor and by_user_and_flavor lines carry their cost too."
    )
    by_request = serializers.ListField(
        child=serializers.DictField(),
        help_text="GPU-hours and cost per request (request, workload: cluster, job or "
        "service, user, flavor, gpu_hours, cost, daily: [{day, gpu_hours, cost}]).",
    )


class UsagePeriodIn(drf.Serializer):
    """Query parameters of the usage endpoint."""

    since = serializers.DateTimeField(
        required=False, help_text="ISO 8601; default: 30 days before until."
    )
    until = serializers.DateTimeField(required=False, help_text="ISO 8601; default: now.")
    days = serializers.ChoiceField(
        choices=usage.USAGE_WINDOWS,
        required=False,
        help_text="The last 7, 30 or 90 UTC days up to now, today included (as the "
        "dashboard's switch); instead of since and until.",
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if "days" in attrs:
            if "since" in attrs or "until" in attrs:
                raise serializers.ValidationError({"days": "Give days or since/until, not both."})
            now = timezone.now()
            return {"since": usage.window_start(days=int(attrs["days"]), now=now), "until": now}
        until = attrs.get("until") or timezone.now()
        try:
            since = attrs.get("since") or until - timedelta(days=30)
        except OverflowError:  # until in the first 30 days of year 1
            raise serializers.ValidationError({"until": "Out of the supported range."}) from None
        if since >= until:
            raise serializers.ValidationError({"since": "Must be before until."})
        return {"since": since, "until": until}


class TenantUsageViewSet(TenantScopedViewSet[ClusterRequest]):
    """GPU-hours per user and flavor for a tenant (chargeback): one summary object, so it
    is routed as ``retrieve`` (neither paginated nor filtered)."""

    action_roles = {"retrieve": Role.VIEWER}
    serializer_class = UsageOut
    pagination_class = None
    filter_backends: list[Any] = []
    queryset = ClusterRequest.objects.none()  # for the OpenAPI schema only

    def scoped_queryset(self, tenant: Any) -> Any:
        return ClusterRequest.objects.none()

    @extend_schema(parameters=[UsagePeriodIn], responses=UsageOut)
    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        period = UsagePeriodIn(data=request.query_params)
        period.is_valid(raise_exception=True)
        # The buckets once, for the summary and the daily rows alike (two queries).
        hours = usage.period_hours(tenant=self.tenant, **period.validated_data)
        summary = selectors.usage_summary(tenant=self.tenant, hours=hours, **period.validated_data)
        rows = costs.cost_rows(tenant=self.tenant, **period.validated_data)
        summary = costs.with_costs(summary, rows)
        bucket_cost = costs.cost_by_bucket(rows)
        summary["daily"] = [
            {
                "day": row.day.isoformat(),
                "user": row.user,
                "flavor": row.flavor,
                "gpu_hours": float(round(row.gpu_hours, 3)),
                "active_hours": float(round(row.active_hours, 3)),
                "idle_hours": float(round(row.idle_hours, 3)),
                "cost": float(
                    costs.money(
                        bucket_cost.get((row.day, row.tenant, row.user, row.flavor), Decimal(0))
                    )
                ),
            }
            for row in usage.day_rows(*hours)
        ]
        return Response(UsageOut(summary).data)
