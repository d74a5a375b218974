"""Showback endpoints (docs/cost.md).

``/api/v1/platform/prices/``: every flavor price over time (any signed-in user may read
them); ``POST`` sets one (platform admins; 403 for anybody else).
``/api/v1/tenants/{slug}/cost-caps/``: the tenant's monthly money caps with this month's
spend (any member); ``PUT`` sets one, or removes it with both limits null (its admins).
A bad value is a 400 that changes nothing (:mod:`clusters.requests.cost_settings`).
"""

from __future__ import annotations

from typing import Any

from django.http import Http404
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import permissions, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from clusters.models import FlavorPrice
from clusters.requests import cost_settings
from clusters.rows import cost_caps, costs
from controlplane.api import generics as drf
from controlplane.api.serializers import StrictSerializer
from controlplane.api.throttles import WriteThrottle
from tenants.models import Role, Tenant
from tenants.selectors import is_platform_admin, tenant_with_role

_MONEY: dict[str, Any] = {"max_digits": 14, "decimal_places": 2, "coerce_to_string": False}
_PRICE: dict[str, Any] = {"max_digits": 12, "decimal_places": 4, "coerce_to_string": False}


class PlatformAdminSetsPrices(permissions.BasePermission):
    """Reads for every signed-in user, writes for platform admins (checked here too, so
    that ``OPTIONS`` lists only the methods the caller may use)."""

    message = "Only platform admins set prices."

    def has_permission(self, request: Request, view: Any) -> bool:
        if not request.user or not request.user.is_authenticated:
            return False
        return request.method in permissions.SAFE_METHODS or is_platform_admin(request.user)


class TenantAdminSetsCaps(permissions.BasePermission):
    """Members read the URL's tenant's caps, its admins (and platform admins) set them;
    a tenant the caller is no member of is a 404."""

    message = "Only the tenant's admins set its cost caps."

    def has_permission(self, request: Request, view: Any) -> bool:
        if not request.user or not request.user.is_authenticated:
            return False
        found = tenant_with_role(user=request.user, slug=view.kwargs["tenant_slug"])
        if found is None:
            slug = view.kwargs["tenant_slug"]
            raise Http404(f"You are not a member of a tenant called {slug!r}.")
        view.tenant, role = found
        if request.method in permissions.SAFE_METHODS:
            return True
        return Role.rank(role or Role.VIEWER) >= Role.rank(Role.ADMIN)


class PriceOut(drf.ModelSerializer):
    """A flavor's price per GPU-hour from ``effective_from`` until its next price."""

    flavor = serializers.CharField(source="flavor_name")
    price_per_gpu_hour = serializers.DecimalField(**_PRICE)
    borrowed_price_per_gpu_hour = serializers.DecimalField(**_PRICE, allow_null=True)
    currency = serializers.SerializerMethodField()

    class Meta:
        model = FlavorPrice
        fields = [
            "flavor",
            "price_per_gpu_hour",
            "borrowed_price_per_gpu_hour",
            "currency",
            "effective_from",
        ]
        read_only_fields = fields

    def get_currency(self, obj: FlavorPrice) -> str:
        return costs.currency()


class PriceIn(StrictSerializer):
    """A price to set; one of the same flavor and moment is replaced."""

    flavor = serializers.CharField(max_length=40)
    price_per_gpu_hour = serializers.DecimalField(max_digits=12, decimal_places=4, min_value=0)
    borrowed_price_per_gpu_hour = serializers.DecimalField(
        max_digits=12, decimal_places=4, min_value=0, required=False, allow_null=True
    )
    effective_from = serializers.DateTimeField(
        required=False, help_text="ISO 8601 with a zone; default: now."
    )


class PricesView(APIView):
    """Every flavor price over time; set one (platform admins)."""

    permission_classes = [PlatformAdminSetsPrices]
    throttle_classes = [WriteThrottle]

    @extend_schema(responses={200: PriceOut(many=True)})
    def get(self, request: Request) -> Response:
        rows = FlavorPrice.objects.order_by("flavor_name", "effective_from")
        return Response(PriceOut(rows, many=True).data)

    @extend_schema(
        request=PriceIn,
        responses={201: PriceOut, 400: OpenApiResponse(description="Invalid, or no flavor")},
    )
    def post(self, request: Request) -> Response:
        body = PriceIn(data=request.data)
        body.is_valid(raise_exception=True)
        row = cost_settings.flavor_price_set(actor=request.user, **body.validated_data)
        return Response(PriceOut(row).data, status=status.HTTP_201_CREATED)


class CostCapOut(drf.Serializer):
    """A monthly money cap of the tenant (``user`` empty) or an engineer, and what it
    has spent this UTC month."""

    user = serializers.CharField(source="cap.username")
    soft_limit = serializers.DecimalField(source="cap.soft_limit", **_MONEY, allow_null=True)
    hard_limit = serializers.DecimalField(source="cap.hard_limit", **_MONEY, allow_null=True)
    spent = serializers.DecimalField(**_MONEY)
    month = serializers.DateField()
    soft_crossed = serializers.BooleanField()
    hard_crossed = serializers.BooleanField(help_text="New requests are refused.")
    currency = serializers.SerializerMethodField()

    def get_currency(self, obj: Any) -> str:
        return costs.currency()


class CostCapIn(StrictSerializer):
    """A cap to set; both limits null remove it."""

    user = serializers.CharField(max_length=150, required=False, allow_blank=True, default="")
    soft_limit = serializers.DecimalField(max_digits=14, decimal_places=2, allow_null=True)
    hard_limit = serializers.DecimalField(max_digits=14, decimal_places=2, allow_null=True)


class TenantCostCapsView(APIView):
    """A tenant's monthly money caps (any member); set or remove one (its admins)."""

    permission_classes = [TenantAdminSetsCaps]
    throttle_classes = [WriteThrottle]
    tenant: Tenant  # set by the permission

    @extend_schema(responses={200: CostCapOut(many=True)})
    def get(self, request: Request, tenant_slug: str) -> Response:
        tenant = self.tenant
        return Response(CostCapOut(cost_caps.cap_statuses(tenant=tenant), many=True).data)

    @extend_schema(
        request=CostCapIn,
        responses={
            200: CostCapOut(many=True),
            400: OpenApiResponse(description="Invalid, or not a member"),
        },
    )
    def put(self, request: Request, tenant_slug: str) -> Response:
        tenant = self.tenant
        body = CostCapIn(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        cost_settings.cost_cap_set(
            actor=request.user,
            tenant=tenant,
            username=data["user"],
            soft_limit=data["soft_limit"],
            hard_limit=data["hard_limit"],
        )
        return Response(CostCapOut(cost_caps.cap_statuses(tenant=tenant), many=True).data)
