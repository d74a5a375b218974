"""Priority classes (docs/preemption.md): platform admins read and change them under
``/platform/priority-classes/``; a tenant's members read the classes they may pick
under ``/tenants/{slug}/priority-classes/``."""

from __future__ import annotations

from typing import Any, ClassVar

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import mixins, permissions, status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from controlplane.api.throttles import WriteThrottle
from controlplane.api.viewsets import create_action
from tenants import services
from tenants.api import priority_class_serializers as s
from tenants.api.permissions import PlatformAdminOnly
from tenants.api.viewsets import TenantScopedViewSet
from tenants.models import PriorityClass, Role, Tenant
from tenants.selectors import priority_class_list, priority_classes_for


class PlatformAdminsOnly(PlatformAdminOnly):
    """Platform admins only, reads included: a class names the tenants it allows."""

    message = "Only platform admins may see or change the platform's priority classes."


class PriorityClassViewSet(mixins.ListModelMixin, viewsets.GenericViewSet[PriorityClass]):
    """The platform's priority classes, highest value first (platform admins only)."""

    permission_classes = [permissions.IsAuthenticated, PlatformAdminsOnly]
    throttle_classes = [WriteThrottle]
    serializer_class = s.PriorityClassOut
    pagination_class = None
    filter_backends: list[Any] = []
    lookup_field = "name"

    def get_queryset(self) -> Any:
        return priority_class_list()

    def retrieve(self, request: Request, name: str) -> Response:
        return Response(s.PriorityClassOut(self.get_object()).data)

    create = create_action(
        s.PriorityClassCreateIn,
        services.priority_class_create,
        s.PriorityClassOut,
        errors={400: OpenApiResponse(description="Invalid, or a clash with another class")},
    )

    def _change(self, request: Request, *, partial: bool) -> Response:
        pc = self.get_object()
        body = s.PriorityClassUpdateIn(pc, data=request.data, partial=partial)
        body.is_valid(raise_exception=True)
        pc = services.priority_class_update(
            actor=request.user, priority_class=pc, changes=body.validated_data
        )
        return Response(s.PriorityClassOut(priority_class_list().get(pk=pc.pk)).data)

    @extend_schema(request=s.PriorityClassUpdateIn, responses={200: s.PriorityClassOut})
    def update(self, request: Request, name: str) -> Response:
        return self._change(request, partial=False)

    @extend_schema(request=s.PriorityClassUpdateIn, responses={200: s.PriorityClassOut})
    def partial_update(self, request: Request, name: str) -> Response:
        return self._change(request, partial=True)

    @extend_schema(
        responses={204: None, 409: OpenApiResponse(description="Live requests use the class")}
    )
    def destroy(self, request: Request, name: str) -> Response:
        services.priority_class_delete(actor=request.user, priority_class=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)

    def get_object(self) -> PriorityClass:
        found: PriorityClass = get_object_or_404(self.get_queryset(), name=self.kwargs["name"])
        return found


class TenantPriorityClassViewSet(TenantScopedViewSet[PriorityClass]):
    """The classes the tenant's members may pick for a request, highest value first."""

    action_roles: ClassVar[dict[str, str]] = {"list": Role.VIEWER}
    serializer_class = s.TenantPriorityClassOut
    pagination_class = None
    filter_backends: list[Any] = []
    queryset = PriorityClass.objects.none()  # for the schema; requests use scoped_queryset

    def scoped_queryset(self, tenant: Tenant) -> Any:
        return priority_classes_for(tenant)

    @extend_schema(responses={200: s.TenantPriorityClassOut(many=True)})
    def list(self, request: Request, tenant_slug: str) -> Response:
        rows = self.scoped_queryset(self.tenant)
        return Response(s.TenantPriorityClassOut(rows, many=True).data)
