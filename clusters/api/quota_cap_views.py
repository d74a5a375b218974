"""``/api/v1/platform/quota-caps/``: caps on tenants' quotas per member of the fleet,
for platform admins only (anybody else is refused with 403). ``PUT`` sets or removes one
cap (``gpus`` null); a name that is no tenant, member or flavor is a 400 that changes
nothing (:mod:`clusters.members.quota_caps`)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import permissions, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from clusters.api.kube_cluster_views import PlatformAdminsOnly
from clusters.members import quota_caps
from clusters.models import MemberQuotaCap
from controlplane.api import generics as drf
from controlplane.api.serializers import JsonIntegerField, StrictSerializer
from controlplane.api.throttles import WriteThrottle


class QuotaCapOut(drf.ModelSerializer):
    """At most ``gpus`` GPUs of ``flavor`` held by ``tenant`` on ``kube_cluster``."""

    tenant = serializers.CharField(source="tenant.slug")
    kube_cluster = serializers.CharField(source="kube_cluster.name")
    flavor = serializers.CharField(source="flavor.name")

    class Meta:
        model = MemberQuotaCap
        fields = ["tenant", "kube_cluster", "flavor", "gpus"]
        read_only_fields = fields


class QuotaCapIn(StrictSerializer):
    """One cap to set, or to remove with ``gpus`` null."""

    tenant = serializers.CharField(max_length=63, help_text="The tenant's slug.")
    kube_cluster = serializers.CharField(max_length=40, help_text="The member's name.")
    flavor = serializers.CharField(max_length=40, help_text="The GPU flavor's name.")
    gpus = JsonIntegerField(
        min_value=0,
        max_value=quota_caps.MOST_GPUS,
        allow_null=True,
        help_text="The most GPUs of the flavor the tenant may hold there; null: no cap.",
    )


class QuotaCapsView(APIView):
    """Every cap on tenants' quotas per member; set or remove one."""

    permission_classes = [permissions.IsAuthenticated, PlatformAdminsOnly]
    throttle_classes = [WriteThrottle]

    @extend_schema(
        parameters=[OpenApiParameter("tenant", str, description="Only this tenant's caps.")],
        responses={200: QuotaCapOut(many=True)},
    )
    def get(self, request: Request) -> Response:
        caps = quota_caps.quota_cap_list()
        slug = request.query_params.get("tenant")
        if slug:
            caps = caps.filter(tenant__slug=slug)
        return Response(QuotaCapOut(caps, many=True).data)

    @extend_schema(
        request=QuotaCapIn,
        responses={
            200: QuotaCapOut,
            204: OpenApiResponse(description="The cap is removed"),
            400: OpenApiResponse(description="Invalid, or no such tenant, member or flavor"),
        },
    )
    def put(self, request: Request) -> Response:
        body = QuotaCapIn(data=request.data)
        body.is_valid(raise_exception=True)
        cap: Any = quota_caps.quota_cap_set(actor=request.user, **body.validated_data)
        if cap is None:
            return Response(status=status.HTTP_204_NO_CONTENT)
        return Response(QuotaCapOut(cap).data)
