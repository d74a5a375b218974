"""``/api/v1/platform/fair-share/``: fair share per cohort, as the fair-share page shows it,
for platform admins only (anybody else is refused with 403): each tenant's weight, its
weighted dominant share, and with usage-decayed fair share on its recent GPU-hours and
standing (:mod:`clusters.admission.fairshare`)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from drf_spectacular.utils import extend_schema
from rest_framework import permissions, serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from clusters.live import fleet
from controlplane.api import generics as drf
from tenants.selectors import is_platform_admin


class PlatformAdminsOnly(permissions.BasePermission):
    """Platform admins only: the page names every tenant and its usage."""

    message = "Only platform admins see fair share across tenants."

    def has_permission(self, request: Request, view: Any) -> bool:
        return is_platform_admin(request.user)


class FlavorShareOut(drf.Serializer):
    """A tenant on one flavor."""

    flavor = serializers.CharField()
    nominal = serializers.IntegerField()
    used = serializers.DecimalField(max_digits=12, decimal_places=3)
    borrowed = serializers.DecimalField(max_digits=12, decimal_places=3)
    lent = serializers.DecimalField(max_digits=12, decimal_places=3)
    share = serializers.FloatField()
    recent_gpu_hours = serializers.FloatField(help_text="Decayed GPU-hours (0 when off).")


class TenantShareOut(drf.Serializer):
    """A tenant of a cohort, next in line first."""

    tenant = serializers.CharField()
    weight = serializers.DecimalField(max_digits=8, decimal_places=3)
    share = serializers.FloatField(
        help_text="Weighted dominant share the queue orders by (recent usage included when on)."
    )
    recent_gpu_hours = serializers.FloatField(help_text="Decayed GPU-hours (0 when off).")
    recent_part = serializers.FloatField(help_text="Its part of the cohort's recent GPU-hours.")
    weight_part = serializers.FloatField(help_text="The part its weight entitles it to.")
    standing = serializers.CharField(help_text='"over its share: ...", "" when off.')
    flavors = FlavorShareOut(many=True)


class CohortShareOut(drf.Serializer):
    """A cohort's tenants."""

    cohort = serializers.CharField()
    tenants = TenantShareOut(many=True)


class FairShareOut(drf.Serializer):
    """Fair share now; ``half_life_hours`` 0: usage-decayed fair share is off."""

    half_life_hours = serializers.FloatField()
    cohorts = CohortShareOut(many=True)


class FairShareView(APIView):
    """Every cohort's tenants with their shares (platform admins)."""

    permission_classes = [permissions.IsAuthenticated, PlatformAdminsOnly]

    @extend_schema(responses={200: FairShareOut})
    def get(self, request: Request) -> Response:
        body: dict[str, Any] = {
            "half_life_hours": float(settings.FAIR_SHARE_HALF_LIFE_HOURS),
            "cohorts": fleet.fair_share_by_cohort(),
        }
        return Response(FairShareOut(body).data)
